//! Reading JSON into Rust types the way Go's `encoding/json` reads it into EMCO's structs.
//!
//! Three rules differ from serde's defaults and matter to EMCO's clients:
//! - `null` is accepted for any value and leaves it at its zero value (`""`, `0`, `false`, an
//!   empty map, list or struct); an `Option` reads it as `None`, a free-form
//!   [`serde_json::Value`] keeps it.
//! - A struct field whose value is `null` is treated as absent, so the field's default applies.
//! - An object key that names no field exactly matches a field case-insensitively (Go matches
//!   `"Metadata"` to the field tagged `metadata`).
//!
//! Unknown keys are ignored, as in Go. Everything else (a string where a number belongs, say)
//! is refused, as Go refuses it.
//!
//! ```
//! #[derive(serde::Deserialize, Default, Debug, PartialEq)]
//! #[serde(default)]
//! struct Spec { name: String, labels: std::collections::BTreeMap<String, String> }
//!
//! let spec: Spec = emco_go::json::from_slice(br#"{"Name": "a", "labels": null}"#).unwrap();
//! assert_eq!(spec, Spec { name: "a".into(), labels: Default::default() });
//! ```

use serde::Deserializer;
use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess};
use serde_json::{Map, Value};

/// Parses `bytes` as JSON and reads it into `T` with Go's rules.
///
/// # Errors
/// Malformed JSON, or a value of the wrong type for `T`.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, serde_json::Error> {
    let value: Value = serde_json::from_slice(bytes)?;
    from_value(&value)
}

/// Reads an already parsed JSON value into `T` with Go's rules.
///
/// # Errors
/// A value of the wrong type for `T`.
pub fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, serde_json::Error> {
    T::deserialize(Go(value))
}

/// A JSON value seen through Go's decoding rules.
#[derive(Debug, Clone, Copy)]
struct Go<'a>(&'a Value);

/// Deserializer methods for scalars: `null` gives the zero value, anything else is read as
/// serde_json reads it.
macro_rules! scalar {
    ($($method:ident => $zero:ident($value:expr)),* $(,)?) => {$(
        fn $method<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
            match self.0 {
                Value::Null => visitor.$zero($value),
                other => other.$method(visitor),
            }
        }
    )*};
}

impl<'de> Deserializer<'de> for Go<'de> {
    type Error = serde_json::Error;

    fn deserialize_any<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Array(items) => visitor.visit_seq(Seq(items.iter())),
            Value::Object(map) => visitor.visit_map(Entries::new(map, None)),
            other => other.deserialize_any(visitor),
        }
    }

    scalar! {
        deserialize_bool => visit_bool(false),
        deserialize_i8 => visit_i64(0),
        deserialize_i16 => visit_i64(0),
        deserialize_i32 => visit_i64(0),
        deserialize_i64 => visit_i64(0),
        deserialize_i128 => visit_i64(0),
        deserialize_u8 => visit_u64(0),
        deserialize_u16 => visit_u64(0),
        deserialize_u32 => visit_u64(0),
        deserialize_u64 => visit_u64(0),
        deserialize_u128 => visit_u64(0),
        deserialize_f32 => visit_f64(0.0),
        deserialize_f64 => visit_f64(0.0),
        deserialize_char => visit_char('\0'),
        deserialize_str => visit_borrowed_str(""),
        deserialize_string => visit_borrowed_str(""),
        deserialize_bytes => visit_borrowed_bytes(&[]),
        deserialize_byte_buf => visit_borrowed_bytes(&[]),
    }

    fn deserialize_option<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.0.deserialize_unit(visitor)
    }

    fn deserialize_unit_struct<V: de::Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_unit_struct(name, visitor)
    }

    fn deserialize_newtype_struct<V: de::Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_seq(Seq([].iter())),
            Value::Array(items) => visitor.visit_seq(Seq(items.iter())),
            other => other.deserialize_seq(visitor),
        }
    }

    fn deserialize_tuple<V: de::Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: de::Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_map(Entries::empty()),
            Value::Object(map) => visitor.visit_map(Entries::new(map, None)),
            other => other.deserialize_map(visitor),
        }
    }

    fn deserialize_struct<V: de::Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_map(Entries::empty()),
            Value::Object(map) => visitor.visit_map(Entries::new(map, Some(fields))),
            other => other.deserialize_struct(name, fields, visitor),
        }
    }

    fn deserialize_enum<V: de::Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_enum(name, variants, visitor)
    }

    fn deserialize_identifier<V: de::Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_identifier(visitor)
    }

    fn deserialize_ignored_any<V: de::Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_unit()
    }
}

struct Seq<'a>(std::slice::Iter<'a, Value>);

impl<'de> SeqAccess<'de> for Seq<'de> {
    type Error = serde_json::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Self::Error> {
        self.0.next().map(|v| seed.deserialize(Go(v))).transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

/// The entries of an object; for a struct, null values are left out and keys are matched to the
/// struct's fields case-insensitively when no field has the exact name.
struct Entries<'a> {
    iter: Option<serde_json::map::Iter<'a>>,
    fields: Option<&'static [&'static str]>,
    value: Option<&'a Value>,
}

impl<'a> Entries<'a> {
    fn new(map: &'a Map<String, Value>, fields: Option<&'static [&'static str]>) -> Self {
        Self {
            iter: Some(map.iter()),
            fields,
            value: None,
        }
    }

    fn empty() -> Self {
        Self {
            iter: None,
            fields: None,
            value: None,
        }
    }
}

impl<'de> MapAccess<'de> for Entries<'de> {
    type Error = serde_json::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        let Some(iter) = self.iter.as_mut() else {
            return Ok(None);
        };
        for (key, value) in iter.by_ref() {
            let key: &'de str = match self.fields {
                Some(_) if value.is_null() => continue,
                Some(fields) if !fields.contains(&key.as_str()) => fields
                    .iter()
                    .copied()
                    .find(|f| f.eq_ignore_ascii_case(key))
                    .unwrap_or(key),
                _ => key,
            };
            self.value = Some(value);
            return seed
                .deserialize(IntoDeserializer::<serde_json::Error>::into_deserializer(
                    key,
                ))
                .map(Some);
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        let value = self
            .value
            .take()
            .ok_or_else(|| de::Error::custom("a map value was asked for before its key"))?;
        seed.deserialize(Go(value))
    }
}

/// Writes `s` as Go's `encoding/json` writes a string (Go 1.22+: `\b` and `\f` short forms),
/// escaping `<`, `>` and `&` when `html` (as `json.Marshal` does).
pub fn write_string(s: &str, html: bool, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' if html => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Default, PartialEq, Deserialize)]
    #[serde(default, rename_all = "camelCase")]
    struct Inner {
        user_name: String,
        count: u32,
        on: bool,
    }

    #[derive(Debug, Default, PartialEq, Deserialize)]
    #[serde(default)]
    struct Outer {
        name: String,
        labels: BTreeMap<String, String>,
        items: Vec<String>,
        inner: Inner,
        maybe: Option<String>,
        free: Value,
    }

    #[test]
    fn null_is_the_zero_value_everywhere() {
        let all_null = json!({"name": null, "labels": null, "items": null, "inner": null,
            "maybe": null, "free": null});
        assert_eq!(from_value::<Outer>(&all_null).unwrap(), Outer::default());
        let nested = json!({"labels": {"a": null}, "items": [null, "x"],
            "inner": {"userName": null, "count": null, "on": null}});
        let got: Outer = from_value(&nested).unwrap();
        assert_eq!(
            got.labels,
            BTreeMap::from([("a".to_owned(), String::new())])
        );
        assert_eq!(got.items, vec![String::new(), "x".to_owned()]);
        assert_eq!(got.inner, Inner::default());
        assert_eq!(from_value::<Option<Inner>>(&Value::Null).unwrap(), None);
    }

    #[test]
    fn free_form_values_keep_their_nulls() {
        let got: Outer = from_value(&json!({"free": {"op": "remove", "value": null}})).unwrap();
        assert_eq!(got.free, json!({"op": "remove", "value": null}));
    }

    #[test]
    fn keys_match_fields_case_insensitively_exact_first() {
        let got: Outer = from_value(&json!({"NAME": "n", "Inner": {"USERNAME": "u"}})).unwrap();
        assert_eq!(got.name, "n");
        assert_eq!(got.inner.user_name, "u");
        // A map keeps its keys as they are.
        let got: Outer = from_value(&json!({"labels": {"Name": "x"}})).unwrap();
        assert_eq!(got.labels.keys().collect::<Vec<_>>(), ["Name"]);
    }

    #[test]
    fn wrong_types_are_refused_as_go_refuses_them() {
        assert!(from_value::<Outer>(&json!({"name": 5})).is_err());
        assert!(from_value::<Outer>(&json!({"inner": {"count": "5"}})).is_err());
        assert!(from_value::<Outer>(&json!({"items": "x"})).is_err());
        assert!(from_value::<Outer>(&json!([1])).is_err());
        assert!(from_slice::<Outer>(b"{").is_err());
    }
}
