//! EMCO's emcoctl documents: multi-document YAML files, optionally rendered as one Go template
//! with a values file as the template's dot, each document located by file, number and line.

use std::path::{Path, PathBuf};

use emco_helm::{TemplateLimits, Templates, Value};
use serde_json::{Map, Value as Json};

use crate::error::{CtlError, Result};

/// The only document version EMCO's emcoctl accepts.
pub const VERSION: &str = "emco/v2";

/// The last anchor segments that name an operation on their parent rather than a collection.
pub const LIFECYCLE: &[&str] = &[
    "apply",
    "approve",
    "instantiate",
    "terminate",
    "stop",
    "status",
    "update",
    "rollback",
    "migrate",
];

/// One document of an emcoctl file.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// The file the document came from.
    pub file: PathBuf,
    /// Its number among the non-empty documents of the file, from 1.
    pub number: usize,
    /// The line of the file where the document starts, from 1.
    pub line: usize,
    /// `resourceContext.anchor`: the URL path below `/v2`, without slashes at either end.
    pub anchor: String,
    /// The request body: every top-level key but `version`, `resourceContext`, `file` and
    /// `files` (so `metadata`, `spec`, `clusterLabel`, ...).
    pub body: Map<String, Json>,
    /// The files to upload, resolved, with the form field they go in (`file` or `files`).
    pub uploads: Vec<(&'static str, PathBuf)>,
}

impl Document {
    /// The object's name: `metadata.name`, or `clusterLabel` for a cluster label.
    #[must_use]
    pub fn name(&self) -> Option<&str> {
        self.body
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Json::as_str)
            .or_else(|| self.body.get("clusterLabel").and_then(Json::as_str))
            .filter(|n| !n.is_empty())
    }

    /// The operation when the anchor ends in one of [`LIFECYCLE`] (`approve`, `instantiate`, ...).
    #[must_use]
    pub fn lifecycle(&self) -> Option<&str> {
        let last = self.anchor.rsplit('/').next()?;
        LIFECYCLE.iter().copied().find(|op| *op == last)
    }

    /// The path of the object the document names: `anchor/name`, or the anchor without a name.
    /// A composite app is addressed with its version too (`composite-apps/NAME/VERSION`).
    #[must_use]
    pub fn object_path(&self) -> String {
        let Some(name) = self.name() else {
            return self.anchor.clone();
        };
        let version = self
            .body
            .get("spec")
            .and_then(|s| s.get("compositeAppVersion"))
            .and_then(Json::as_str)
            .filter(|_| self.anchor.rsplit('/').next() == Some("composite-apps"));
        match version {
            Some(v) => format!("{}/{name}/{v}", self.anchor),
            None => format!("{}/{name}", self.anchor),
        }
    }

    /// Where the document is, for messages.
    #[must_use]
    pub fn position(&self) -> String {
        format!(
            "{}:{} (document {})",
            self.file.display(),
            self.line,
            self.number
        )
    }
}

/// The YAML files named by `paths`: files as given, directories expanded to their `*.yaml` and
/// `*.yml` files in name order.
///
/// # Errors
/// An input error for a path that cannot be read.
pub fn expand_paths(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for path in paths {
        if path.is_dir() {
            let entries = std::fs::read_dir(path)
                .map_err(|e| CtlError::input(path, None, None, format!("cannot read: {e}")))?;
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
                .collect();
            files.sort();
            out.extend(files);
        } else {
            out.push(path.clone());
        }
    }
    Ok(out)
}

/// Reads a values file as EMCO's emcoctl does (go-yaml v3: `yes` and `on` are strings).
///
/// # Errors
/// An input error naming the values file and, for malformed YAML, the line.
pub fn load_values(path: &Path) -> Result<Value> {
    let text = read(path)?;
    read_yaml(&text).map_err(|e| CtlError::input(path, None, yaml_error_line(&e, 1), e))
}

/// The first document of `text` read with go-yaml v3's scalar rules, as EMCO's emcoctl reads
/// its files and values files (`nil` when there is none).
fn read_yaml(text: &str) -> std::result::Result<Value, String> {
    emco_go::yaml::parse_all_with(text, emco_go::yaml::Rules::GoYamlV3)
        .map(|docs| {
            docs.first()
                .map_or(Value::Nil, |d| Value::from_json(&d.value))
        })
        .map_err(|e| format!("error converting YAML to JSON: {e}"))
}

/// Reads several values files and merges them in order, later files winning, like Helm's
/// `-f a.yaml -f b.yaml`: maps merge key by key at every depth, anything else is replaced. An
/// empty file counts as no values. `None` when `paths` is empty.
///
/// # Errors
/// An input error naming the values file that cannot be read or parsed, or whose top level is
/// not a mapping when there is more than one file.
pub fn load_values_files(paths: &[PathBuf]) -> Result<Option<Value>> {
    let mut merged: Option<Value> = None;
    for path in paths {
        let next = load_values(path)?;
        merged = match (merged, next) {
            (None, next) => Some(next),
            (Some(acc), next) if next.is_nil() => Some(acc),
            (Some(acc), next) if acc.is_nil() => Some(next),
            (Some(Value::Map(acc)), Value::Map(next)) => {
                emco_helm::values::merge_maps(&acc, &next);
                Some(Value::Map(acc))
            }
            (Some(_), _) => {
                return Err(CtlError::input(
                    path,
                    None,
                    None,
                    "cannot merge values files whose top level is not a mapping",
                ));
            }
        };
    }
    Ok(merged)
}

/// The name standing for standard input in `-f -`, as errors show it.
pub const STDIN: &str = "<stdin>";

/// Reads, renders (with `values` as the template's dot when given) and parses `path`.
///
/// # Errors
/// An input error naming the file, the document and the line.
pub fn load(path: &Path, values: Option<&Value>) -> Result<Vec<Document>> {
    let text = read(path)?;
    load_text(path, text, values)
}

/// Renders (with `values` when given) and parses `text`, read from `path` (or [`STDIN`]; files
/// it uploads are then relative to the working directory).
///
/// # Errors
/// An input error naming the file, the document and the line.
pub fn load_text(path: &Path, text: String, values: Option<&Value>) -> Result<Vec<Document>> {
    let text = match values {
        Some(values) => render(path, &text, values)?,
        None => text,
    };
    parse(path, &text)
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| CtlError::input(path, None, None, format!("cannot read: {e}")))
}

/// Renders the whole of `text` as one Go template with `values` as dot, as emcoctl's `-v` does.
///
/// # Errors
/// An input error with the line (and the document that line is in) of the template error.
pub fn render(path: &Path, text: &str, values: &Value) -> Result<String> {
    let name = path.display().to_string();
    let mut set = Templates::new();
    let out = set
        .add(&name, text)
        .and_then(|()| set.execute(&name, values, &TemplateLimits::default()));
    out.map_err(|e| {
        let message = e.to_string();
        let line = template_error_line(&message, &name);
        let document = line.map(|l| document_at(text, l));
        CtlError::input(path, document, line, message)
    })
}

/// Parses the documents of `text` (already rendered), read from `path`.
///
/// # Errors
/// An input error naming the file, the document and the line.
pub fn parse(path: &Path, text: &str) -> Result<Vec<Document>> {
    let mut docs = Vec::new();
    for (start, raw) in split(text) {
        let err =
            |line: usize, msg: String| CtlError::input(path, Some(docs.len() + 1), Some(line), msg);
        let value = read_yaml(&raw).map_err(|e| {
            let line = yaml_error_line(&e, start);
            // The parser counts from the document's start; say the file's line instead.
            let message = match (yaml_error_line(&e, 1), line) {
                (Some(rel), Some(abs)) => {
                    e.replacen(&format!("line {rel}"), &format!("line {abs}"), 1)
                }
                _ => e,
            };
            err(line.unwrap_or(start), message)
        })?;
        if value.is_nil() {
            continue;
        }
        let first = first_content_line(&raw).map_or(start, |l| start + l);
        let key_line = |key: &str| key_line(&raw, key).map_or(first, |l| start + l);
        let json = to_json(&value).map_err(|e| err(first, e))?;
        let Json::Object(mut map) = json else {
            return Err(err(first, "the document is not a mapping".to_owned()));
        };
        match map.remove("version") {
            Some(Json::String(v)) if v == VERSION => {}
            Some(v) => {
                return Err(err(
                    key_line("version"),
                    format!("unsupported version {v} (want {VERSION})"),
                ));
            }
            None => return Err(err(first, format!("missing version (want {VERSION})"))),
        }
        let anchor = map
            .remove("resourceContext")
            .and_then(|c| c.get("anchor").and_then(Json::as_str).map(str::to_owned))
            .map(|a| a.trim().trim_matches('/').to_owned())
            .filter(|a| !a.is_empty())
            .ok_or_else(|| {
                err(
                    key_line("resourceContext"),
                    "missing resourceContext.anchor".to_owned(),
                )
            })?;
        let mut uploads = Vec::new();
        for field in ["file", "files"] {
            let Some(v) = map.remove(field) else { continue };
            let line = key_line(field);
            let names: Vec<String> = match v {
                Json::String(s) => vec![s],
                Json::Array(items) => items
                    .into_iter()
                    .map(|i| match i {
                        Json::String(s) => Ok(s),
                        other => Err(err(line, format!("{field}: {other} is not a path"))),
                    })
                    .collect::<Result<_>>()?,
                other => return Err(err(line, format!("{field}: {other} is not a path"))),
            };
            for name in names {
                let resolved = resolve(path, &name)
                    .ok_or_else(|| err(line, format!("{field}: no such file {name:?}")))?;
                uploads.push((field, resolved));
            }
        }
        docs.push(Document {
            file: path.to_owned(),
            number: docs.len() + 1,
            line: first,
            anchor,
            body: map,
            uploads,
        });
    }
    Ok(docs)
}

/// A referenced file: as given (relative to the working directory, as EMCO's emcoctl opens it),
/// else relative to the YAML file's directory.
fn resolve(yaml: &Path, name: &str) -> Option<PathBuf> {
    let name = name.trim();
    let given = PathBuf::from(name);
    if given.is_file() {
        return Some(given);
    }
    let beside = yaml.parent()?.join(name);
    beside.is_file().then_some(beside)
}

/// Splits a YAML stream on `---` lines into (first line number, text) pairs.
fn split(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut start = 1;
    let mut current = String::new();
    for (i, line) in text.lines().enumerate() {
        if is_separator(line) {
            out.push((start, std::mem::take(&mut current)));
            start = i + 2;
            // A `--- value` line starts the next document with content.
            let rest = line[3..].trim();
            if !rest.is_empty() {
                start = i + 1;
                current.push_str(rest);
                current.push('\n');
            }
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    out.push((start, current));
    out
}

fn is_separator(line: &str) -> bool {
    line.starts_with("---") && line[3..].chars().next().is_none_or(char::is_whitespace)
}

/// The number (from 1) of the non-empty document that holds `line` of `text`.
fn document_at(text: &str, line: usize) -> usize {
    let mut n = 0;
    for (start, raw) in split(text) {
        if first_content_line(&raw).is_some() {
            n += 1;
        }
        let end = start + raw.lines().count();
        if line < end.max(start + 1) {
            break;
        }
    }
    n.max(1)
}

/// The offset (from 0) of the first line that is neither blank nor a comment.
fn first_content_line(raw: &str) -> Option<usize> {
    raw.lines().position(|l| {
        let t = l.trim();
        !t.is_empty() && !t.starts_with('#')
    })
}

/// The offset (from 0) of the top-level line defining `key`.
fn key_line(raw: &str, key: &str) -> Option<usize> {
    raw.lines().position(|l| {
        l.strip_prefix(key)
            .is_some_and(|rest| rest.trim_start().starts_with(':'))
    })
}

/// The file line of a YAML error `... line N: ...` in a document starting at line `start`.
fn yaml_error_line(message: &str, start: usize) -> Option<usize> {
    let at = message.find("line ")?;
    let n = leading_number(&message[at + 5..])?;
    Some(start + n.saturating_sub(1))
}

/// The line of a Go template error `template: NAME:LINE:...`.
fn template_error_line(message: &str, name: &str) -> Option<usize> {
    let at = message.find(&format!("{name}:"))?;
    leading_number(&message[at + name.len() + 1..])
}

fn leading_number(s: &str) -> Option<usize> {
    let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// A template value as JSON (numbers as Go's `encoding/json` writes them).
///
/// # Errors
/// When the value holds something JSON cannot (a NaN, a function).
pub fn to_json(value: &Value) -> Result<Json, String> {
    let text = emco_helm::json::to_json(value, false)?;
    serde_json::from_str(&text).map_err(|e| e.to_string())
}
