//! YAML as Go programs read and write it: the one YAML module of the workspace.
//!
//! Reading follows `sigs.k8s.io/yaml` (`YAMLToJSON`) over go-yaml v2, which is how kubectl and
//! client-go read manifests, Helm reads values and EMCO reads its files: YAML 1.1 scalars
//! (`0744` is the integer 484, `yes` is `true`), integers stay integers, duplicate keys keep the
//! last value, merge keys and anchors expand, and keys become JSON object keys. Typed reads
//! ([`from_str`]) then follow Go's `encoding/json` rules ([`crate::json`]).
//!
//! Writing follows `sigs.k8s.io/yaml.Marshal` (go-yaml v2's emitter after a JSON round trip).
//!
//! ```
//! let doc = emco_go::yaml::parse("mode: 0744\nenabled: on\nname: web\n").unwrap();
//! assert_eq!(doc, serde_json::json!({"mode": 484, "enabled": true, "name": "web"}));
//! assert_eq!(emco_go::yaml::to_string(&doc).unwrap(), "enabled: true\nmode: 484\nname: web\n");
//! ```

mod emit;
mod read;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use emit::{Node, emit};

/// A YAML document that could not be read or written, worded as go-yaml words it
/// (`yaml: line 3: mapping values are not allowed in this context`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct Error {
    line: Option<usize>,
    pub(crate) message: String,
    json: bool,
}

impl Error {
    fn at(line: usize, message: String) -> Self {
        Self {
            line: Some(line),
            message,
            json: false,
        }
    }

    /// An error of the JSON step (a NaN, a type mismatch), worded as `encoding/json` words it.
    fn json(message: String) -> Self {
        Self {
            line: None,
            message,
            json: true,
        }
    }

    /// The line (from 1, within the text given) the error is on, when it is a syntax error.
    #[must_use]
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// The message without go-yaml's `yaml: line N:` prefix.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }

    fn render(&self) -> String {
        match (self.json, self.line) {
            (true, _) => self.message.clone(),
            (false, Some(line)) => format!("yaml: line {line}: {}", self.message),
            (false, None) => format!("yaml: {}", self.message),
        }
    }
}

/// Which go-yaml's scalar rules a reading follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rules {
    /// go-yaml v2 (YAML 1.1 scalars: `yes`, `on`, `y` are booleans): what `sigs.k8s.io/yaml`,
    /// kubectl, client-go and Helm read with.
    #[default]
    GoYamlV2,
    /// go-yaml v3 (only `true` and `false` are booleans; `yes`, `on` are strings): what EMCO's
    /// emcoctl reads its files and values files with. Numbers read as v2 reads them (v3 keeps
    /// `0744` octal for compatibility).
    GoYamlV3,
}

/// One document of a YAML stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// The line (from 1) its content starts on.
    pub line: usize,
    /// Its content as JSON; `null` for an empty document.
    pub value: Value,
}

/// The first document of `text` as JSON (`null` when there is none), as `yaml.YAMLToJSON`.
///
/// # Errors
/// Malformed YAML, or a value JSON cannot hold (`.nan`).
pub fn parse(text: &str) -> Result<Value, Error> {
    Ok(read::documents(text, Rules::GoYamlV2)?
        .into_iter()
        .next()
        .map_or(Value::Null, |(_, v)| v))
}

/// Every document of a YAML stream (`---`-separated), empty ones included as `null`.
///
/// # Errors
/// Malformed YAML in any document, or a value JSON cannot hold.
pub fn parse_all(text: &str) -> Result<Vec<Document>, Error> {
    parse_all_with(text, Rules::GoYamlV2)
}

/// [`parse_all`] with the scalar rules of `rules`.
///
/// ```
/// use emco_go::yaml::{Rules, parse_all_with};
/// let docs = parse_all_with("on: yes\nok: true\n", Rules::GoYamlV3).unwrap();
/// assert_eq!(docs[0].value, serde_json::json!({"on": "yes", "ok": true}));
/// ```
///
/// # Errors
/// As [`parse_all`].
pub fn parse_all_with(text: &str, rules: Rules) -> Result<Vec<Document>, Error> {
    Ok(read::documents(text, rules)?
        .into_iter()
        .map(|(line, value)| Document { line, value })
        .collect())
}

/// The first document of `text` read into `T`, as `sigs.k8s.io/yaml.Unmarshal` reads it.
///
/// # Errors
/// Malformed YAML, or content of the wrong shape for `T`.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    let value = parse(text)?;
    crate::json::from_value(&value)
        .map_err(|e| Error::json(format!("error unmarshaling JSON: {e}")))
}

/// `value` as YAML text ending in a newline, as `sigs.k8s.io/yaml.Marshal` writes it.
///
/// # Errors
/// When `value` does not serialize to JSON, or holds a float JSON cannot (NaN).
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String, Error> {
    let json = serde_json::to_value(value).map_err(|e| Error::json(format!("json: {e}")))?;
    Ok(emit(&Node::from_json(&json)?))
}

#[cfg(test)]
mod tests;
