//! The document commands: what request each document becomes, and running them in order.

use std::io::Write;
use std::time::Duration;

use http::Method;
use serde_json::Value as Json;

use crate::client::{Body, Client, Response, file_name};
use crate::document::Document;
use crate::error::{CtlError, Result};

/// A document command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// POST every document, in order.
    Apply,
    /// DELETE every document's object, in reverse order; instantiate becomes terminate.
    Delete,
    /// GET every document's object.
    Get,
    /// PUT every document's object.
    Update,
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Output {
    /// One line per document (apply, delete, update) or a table (get).
    #[default]
    Table,
    /// A JSON array of `{url, status, body}`.
    Json,
    /// The same array as YAML.
    Yaml,
}

/// The options of a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Stop at the first failed request (`-s`).
    pub stop_on_failure: bool,
    /// How long to wait after a 202 (`-w`).
    pub wait: Duration,
    /// The output format.
    pub output: Output,
}

/// What a request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// Nothing.
    Empty,
    /// The document's body, as JSON or (with files) as a multipart form.
    Document,
}

/// The request a document becomes under a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// The method.
    pub method: Method,
    /// The path, `/v2/...`.
    pub path: String,
    /// The body.
    pub payload: Payload,
}

/// The request `doc` becomes under `cmd`, or `None` when the command skips it (for example
/// deleting an `approve` document).
#[must_use]
pub fn plan(cmd: Command, doc: &Document) -> Option<Planned> {
    let planned = |method, path: &str, payload| {
        Some(Planned {
            method,
            path: format!("/v2/{path}"),
            payload,
        })
    };
    match (cmd, doc.lifecycle()) {
        (Command::Apply, Some(_)) => planned(Method::POST, &doc.anchor, Payload::Empty),
        (Command::Apply, None) => planned(Method::POST, &doc.anchor, Payload::Document),
        (Command::Get, Some("status")) => planned(Method::GET, &doc.anchor, Payload::Empty),
        (Command::Get, None) => planned(Method::GET, &doc.object_path(), Payload::Empty),
        (Command::Update, None) => planned(Method::PUT, &doc.object_path(), Payload::Document),
        (Command::Delete, Some("instantiate")) => {
            let parent = doc.anchor.rsplit_once('/').map_or("", |(p, _)| p);
            planned(Method::POST, &format!("{parent}/terminate"), Payload::Empty)
        }
        (Command::Delete, None) => planned(Method::DELETE, &doc.object_path(), Payload::Empty),
        (Command::Get | Command::Update | Command::Delete, Some(_)) => None,
    }
}

/// The body of `doc`: JSON, or a multipart form with the JSON as `metadata` when it uploads
/// files.
///
/// # Errors
/// An input error when a referenced file cannot be read.
pub fn body(doc: &Document) -> Result<Body> {
    let json = serde_json::to_vec(&doc.body).map_err(|e| CtlError::Request(e.to_string()))?;
    if doc.uploads.is_empty() {
        return Ok(Body::Json(json));
    }
    let mut files = Vec::with_capacity(doc.uploads.len());
    for (field, path) in &doc.uploads {
        let data = std::fs::read(path).map_err(|e| {
            CtlError::input(
                &doc.file,
                Some(doc.number),
                Some(doc.line),
                format!("{field}: cannot read {}: {e}", path.display()),
            )
        })?;
        files.push(((*field).to_owned(), file_name(path), data));
    }
    Ok(Body::Multipart {
        metadata: json,
        files,
    })
}

/// The result of one document.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Where the document is.
    pub position: String,
    /// The request, or `None` when skipped.
    pub request: Option<(Method, String)>,
    /// The answer; `Err` with the message when the request could not be made.
    pub response: Option<std::result::Result<Response, String>>,
    /// The document's name.
    pub name: Option<String>,
}

impl Outcome {
    /// Whether the document succeeded (or was skipped).
    #[must_use]
    pub fn ok(&self) -> bool {
        match &self.response {
            None => true,
            Some(Ok(r)) => r.ok(),
            Some(Err(_)) => false,
        }
    }

    /// The one result line: method, URL, status code and a short body.
    #[must_use]
    pub fn line(&self) -> String {
        match (&self.request, &self.response) {
            (None, _) | (_, None) => format!("{}: skipped", self.position),
            (Some((m, url)), Some(Ok(r))) => format!(
                "{m} {url} -> {} {}",
                r.status,
                short(&String::from_utf8_lossy(&r.body))
            ),
            (Some((m, url)), Some(Err(e))) => format!("{m} {url} -> failed: {e}"),
        }
    }

    /// The answer as JSON for `--output json|yaml`.
    #[must_use]
    pub fn to_json(&self) -> Json {
        let mut out = serde_json::Map::new();
        out.insert("document".to_owned(), Json::String(self.position.clone()));
        if let Some((m, url)) = &self.request {
            out.insert("method".to_owned(), Json::String(m.to_string()));
            out.insert("url".to_owned(), Json::String(url.clone()));
        }
        match &self.response {
            None => {
                out.insert("skipped".to_owned(), Json::Bool(true));
            }
            Some(Ok(r)) => {
                out.insert("status".to_owned(), Json::from(r.status));
                let body = serde_json::from_slice(&r.body).unwrap_or_else(|_| {
                    Json::String(String::from_utf8_lossy(&r.body).into_owned())
                });
                out.insert("body".to_owned(), body);
            }
            Some(Err(e)) => {
                out.insert("error".to_owned(), Json::String(e.clone()));
            }
        }
        Json::Object(out)
    }
}

/// `text` on one line, cut at 200 characters.
fn short(text: &str) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &one[..i]),
        None => one,
    }
}

/// Runs `cmd` over `docs` (in reverse for delete), writing the results to `out`. Returns the
/// outcomes; a failed request stops the run only with `stop_on_failure`.
///
/// # Errors
/// An input error when a referenced file cannot be read, or a write error on `out`.
pub async fn run(
    client: &Client,
    cmd: Command,
    docs: &[Document],
    opts: &Options,
    out: &mut dyn Write,
) -> Result<Vec<Outcome>> {
    let ordered: Vec<&Document> = if cmd == Command::Delete {
        docs.iter().rev().collect()
    } else {
        docs.iter().collect()
    };
    let mut outcomes = Vec::with_capacity(ordered.len());
    for doc in ordered {
        let mut outcome = Outcome {
            position: doc.position(),
            request: None,
            response: None,
            name: doc.name().map(str::to_owned),
        };
        if let Some(p) = plan(cmd, doc) {
            let body = match p.payload {
                Payload::Empty => Body::Empty,
                Payload::Document => body(doc)?,
            };
            let response = client
                .send(p.method.clone(), &p.path, body)
                .await
                .map_err(|e| e.to_string());
            if matches!(&response, Ok(r) if r.status == 202) && !opts.wait.is_zero() {
                tokio::time::sleep(opts.wait).await;
            }
            outcome.request = Some((p.method, client.url(&p.path)));
            outcome.response = Some(response);
        }
        let failed = !outcome.ok();
        let progress = opts.output == Output::Table && cmd != Command::Get;
        if progress || failed {
            writeln!(out, "{}", outcome.line()).map_err(write_error)?;
        }
        outcomes.push(outcome);
        if failed && opts.stop_on_failure {
            break;
        }
    }
    Ok(outcomes)
}

fn write_error(e: std::io::Error) -> CtlError {
    CtlError::Request(format!("cannot write the output: {e}"))
}

/// Prints the outcomes of `get` (or any command with `--output json|yaml`) to `out`.
///
/// # Errors
/// A write error on `out`.
pub fn print(
    cmd: Command,
    outcomes: &[Outcome],
    output: Output,
    out: &mut dyn Write,
) -> Result<()> {
    let all = || Json::Array(outcomes.iter().map(Outcome::to_json).collect());
    let text = match output {
        Output::Table if cmd == Command::Get => table(outcomes),
        Output::Table => return Ok(()),
        Output::Json => {
            let mut s = serde_json::to_string_pretty(&all())
                .map_err(|e| CtlError::Request(e.to_string()))?;
            s.push('\n');
            s
        }
        Output::Yaml => emco_helm::yaml::to_yaml(&emco_helm::Value::from_json(&all()))
            .map_err(CtlError::Request)?,
    };
    out.write_all(text.as_bytes()).map_err(write_error)
}

/// The `get` table: name, status and description of each object.
fn table(outcomes: &[Outcome]) -> String {
    let mut rows = vec![[
        "NAME".to_owned(),
        "STATUS".to_owned(),
        "DESCRIPTION".to_owned(),
        "URL".to_owned(),
    ]];
    for o in outcomes {
        let Some((_, url)) = &o.request else { continue };
        let (status, description) = match &o.response {
            Some(Ok(r)) => {
                let json: Json = serde_json::from_slice(&r.body).unwrap_or(Json::Null);
                let description = json
                    .get("metadata")
                    .and_then(|m| m.get("description"))
                    .and_then(Json::as_str)
                    .unwrap_or_default()
                    .to_owned();
                (r.status.to_string(), description)
            }
            Some(Err(_)) | None => ("-".to_owned(), String::new()),
        };
        rows.push([
            o.name.clone().unwrap_or_else(|| "-".to_owned()),
            status,
            description,
            url.clone(),
        ]);
    }
    let widths: Vec<usize> = (0..4)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut s = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        s.push_str(cells.join("  ").trim_end());
        s.push('\n');
    }
    s
}
