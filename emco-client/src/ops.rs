//! The document commands: what request each document becomes, and running them in order.

use std::io::Write;
use std::time::Duration;

use http::Method;
use serde_json::Value as Json;

use crate::client::{Body, Client, FilePart, Response, file_name};
use crate::document::Document;
use crate::error::{CtlError, Result};
pub use crate::output::{Output, format_table, render};
use crate::status::{Target, Waited, wait_operation};

/// How long `delete` waits for a terminate to finish when `-w` is not given: EMCO refuses to
/// delete a deployment intent group or logical cloud while it is still terminating.
pub const DEFAULT_TERMINATE_WAIT: Duration = Duration::from_secs(120);

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

/// The options of a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Stop at the first failed request (`-s`).
    pub stop_on_failure: bool,
    /// `-w`: after a 202 for an operation with a status route (instantiate, terminate, update,
    /// rollback, migrate), wait at most this long for it to settle; after other 202s, or when
    /// the status route is not available, sleep this long as EMCO's emcoctl does. Zero: no
    /// wait, except that `delete` always waits (at most [`DEFAULT_TERMINATE_WAIT`]) for a
    /// terminate to finish before going on.
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
        // Rollback and migrate carry their target (`spec.revision`, the target version).
        (Command::Apply, Some("rollback" | "migrate")) => {
            planned(Method::POST, &doc.anchor, Payload::Document)
        }
        (Command::Apply, Some(_)) => planned(Method::POST, &doc.anchor, Payload::Empty),
        (Command::Apply, None) => planned(Method::POST, &doc.anchor, Payload::Document),
        (Command::Get, Some("status")) => planned(Method::GET, &doc.anchor, Payload::Empty),
        (Command::Get, None) => planned(Method::GET, &doc.object_path(), Payload::Empty),
        (Command::Update, None) => planned(Method::PUT, &doc.object_path(), Payload::Document),
        // A cluster's networks (ncm's `apply`) are removed by `terminate`, as EMCO's emcoctl.
        (Command::Delete, Some("instantiate" | "apply")) => {
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
        // Read while the request is sent; checked here so that a missing file is an input error.
        std::fs::File::open(path).map_err(|e| {
            CtlError::input(
                &doc.file,
                Some(doc.number),
                Some(doc.line),
                format!("{field}: cannot read {}: {e}", path.display()),
            )
        })?;
        files.push(FilePart {
            field: (*field).to_owned(),
            name: file_name(path),
            path: path.clone(),
        });
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
    /// How the wait for an accepted operation ended, when there was one.
    pub waited: Option<Waited>,
}

impl Outcome {
    /// Whether the document succeeded (or was skipped).
    #[must_use]
    pub fn ok(&self) -> bool {
        let waited_ok = !matches!(self.waited, Some(Waited::Failed(_) | Waited::TimedOut(_)));
        waited_ok
            && match &self.response {
                None => true,
                Some(Ok(r)) => r.ok(),
                Some(Err(_)) => false,
            }
    }

    /// The one result line: method, URL, status code, a short body and how a wait ended; a
    /// failure starts with the document's position (`file:LINE (document N): ...`).
    #[must_use]
    pub fn line(&self) -> String {
        let mut line = match (&self.request, &self.response) {
            (None, _) | (_, None) => return format!("{}: skipped", self.position),
            (Some((m, url)), Some(Ok(r))) => {
                let body = short(&String::from_utf8_lossy(&r.body));
                if body.is_empty() {
                    format!("{m} {url} -> {}", r.status)
                } else {
                    format!("{m} {url} -> {} {body}", r.status)
                }
            }
            (Some((m, url)), Some(Err(e))) => format!("{m} {url} -> failed: {e}"),
        };
        match &self.waited {
            None => {}
            Some(Waited::Settled(s)) => line.push_str(&format!(" (waited: {s})")),
            Some(Waited::Failed(s)) => line.push_str(&format!(" (operation failed: {s})")),
            Some(Waited::TimedOut(s)) => line.push_str(&format!(" (still {s} after the wait)")),
            Some(Waited::Unavailable(_)) => line.push_str(" (waited)"),
        }
        if self.ok() {
            line
        } else {
            format!("{}: {line}", self.position)
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
        if let Some(w) = &self.waited {
            let (result, status) = match w {
                Waited::Settled(s) => ("settled", s),
                Waited::Failed(s) => ("failed", s),
                Waited::TimedOut(s) => ("timeout", s),
                Waited::Unavailable(s) => ("slept", s),
            };
            out.insert(
                "waited".to_owned(),
                serde_json::json!({"result": result, "status": status}),
            );
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
            waited: None,
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
            if matches!(&response, Ok(r) if r.status == 202) {
                outcome.waited = wait(client, cmd, doc, &p, opts.wait).await;
            }
            outcome.request = Some((p.method, client.url(&p.path)));
            outcome.response = Some(response);
        }
        let failed = !outcome.ok();
        let progress = opts.output == Output::Table && cmd != Command::Get;
        if progress || failed {
            writeln!(out, "{}", outcome.line()).map_err(CtlError::write)?;
        }
        outcomes.push(outcome);
        if failed && opts.stop_on_failure {
            break;
        }
    }
    Ok(outcomes)
}

/// The wait after an accepted lifecycle request `p` of `doc` (see [`Options::wait`]).
async fn wait(
    client: &Client,
    cmd: Command,
    doc: &Document,
    p: &Planned,
    wait: Duration,
) -> Option<Waited> {
    let (object, op) = p.path.trim_start_matches("/v2/").rsplit_once('/')?;
    let watchable = matches!(
        op,
        "instantiate" | "terminate" | "update" | "rollback" | "migrate"
    );
    let bound = if !wait.is_zero() {
        wait
    } else if cmd == Command::Delete && op == "terminate" {
        DEFAULT_TERMINATE_WAIT
    } else {
        return None;
    };
    if !watchable {
        tokio::time::sleep(bound).await;
        return Some(Waited::Unavailable(format!("{op} has no status")));
    }
    let target = Target {
        position: doc.position(),
        object: object.to_owned(),
    };
    let waited = wait_operation(client, &target, op, bound).await;
    if matches!(waited, Waited::Unavailable(_)) {
        // Without a status route, -w means what it means to EMCO's emcoctl: sleep. The
        // implicit wait of delete has nothing to go by and does not sleep.
        if wait.is_zero() {
            return None;
        }
        tokio::time::sleep(wait).await;
    }
    Some(waited)
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
    let text = match output {
        Output::Table if cmd == Command::Get => table(outcomes),
        Output::Table => return Ok(()),
        Output::Json | Output::Yaml => render(
            &Json::Array(outcomes.iter().map(Outcome::to_json).collect()),
            output,
        )?,
    };
    out.write_all(text.as_bytes()).map_err(CtlError::write)
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
    let rows: Vec<Vec<String>> = rows.into_iter().map(Vec::from).collect();
    format_table(&rows)
}
