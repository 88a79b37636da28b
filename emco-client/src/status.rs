//! `status` and `watch`: the status of the deployment intent groups and logical clouds that
//! lifecycle documents name, read from their `status` route and shaped as emco-core's
//! [`model::status`](emco_core::model::status) types.
//!
//! A lifecycle document's anchor ends in an operation (`.../deployment-intent-groups/dig/
//! instantiate`, `projects/p/logical-clouds/lc/instantiate`); its target is the parent's
//! `status` route. [`watch`] polls targets until they settle: instantiated (or updated) and
//! ready, terminated, or failed.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use emco_core::ClusterRef;
use emco_core::lifecycle::DigState;
use emco_core::model::status::{
    AppsList, ClustersByApp, DigStatus, ResourcesByApp, StatusMode, StatusOutput, StatusQuery,
    StatusResponse, StatusType,
};
use http::Method;
use serde_json::{Value as Json, json};
use tokio::time::Instant;

use crate::client::{Body, Client, Response};
use crate::document::Document;
use crate::error::{CtlError, Result};
use crate::output::{Output, format_table};

/// What a status query reports on: the object a lifecycle document operates on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The document it comes from (`file:LINE (document N)`).
    pub position: String,
    /// The object's path below `/v2` (`projects/p/.../deployment-intent-groups/dig`).
    pub object: String,
}

impl Target {
    /// The request path of its status route, `/v2/OBJECT/status`.
    #[must_use]
    pub fn status_path(&self) -> String {
        format!("/v2/{}/status", self.object)
    }

    /// `GET /v2/OBJECT/ROUTE` (`route` with its query), its answer decoded; `what` names the
    /// answer in the error when it does not decode.
    ///
    /// # Errors
    /// The server's answer when it is not 200; the decoding error.
    pub async fn get<T: serde::de::DeserializeOwned>(
        &self,
        client: &Client,
        route: &str,
        what: &str,
    ) -> Result<T> {
        let r = client
            .send(
                Method::GET,
                &format!("/v2/{}/{route}", self.object),
                Body::Empty,
            )
            .await?;
        if r.status != 200 {
            return Err(CtlError::Request(format!(
                "{}: {} {}",
                self.label(),
                r.status,
                String::from_utf8_lossy(&r.body).trim()
            )));
        }
        serde_json::from_slice(&r.body).map_err(|e| {
            CtlError::Request(format!("{}: the {what} cannot be read: {e}", self.label()))
        })
    }

    /// A short name for progress lines: the object's collection and name
    /// (`deployment-intent-groups/dig`, `logical-clouds/lc`).
    #[must_use]
    pub fn label(&self) -> String {
        let mut parts = self.object.rsplitn(3, '/');
        match (parts.next(), parts.next()) {
            (Some(name), Some(kind)) => format!("{kind}/{name}"),
            _ => self.object.clone(),
        }
    }
}

/// The targets of the lifecycle documents of `docs`, in order, each object once.
#[must_use]
pub fn targets(docs: &[Document]) -> Vec<Target> {
    let mut out: Vec<Target> = Vec::new();
    for doc in docs {
        if doc.lifecycle().is_none() {
            continue;
        }
        let Some((object, _)) = doc.anchor.rsplit_once('/') else {
            continue;
        };
        if !out.iter().any(|t| t.object == object) {
            out.push(Target {
                position: doc.position(),
                object: object.to_owned(),
            });
        }
    }
    out
}

/// The query string (without `?`) of `q`, as EMCO's status routes read it.
#[must_use]
pub fn query_string(q: &StatusQuery) -> String {
    let mut pairs: Vec<String> = Vec::new();
    let mut add = |k: &str, v: &str| pairs.push(format!("{k}={}", encode(v)));
    if let Some(i) = &q.instance {
        add("instance", i);
    }
    add(
        "status",
        match q.status {
            StatusType::Ready => "ready",
            StatusType::Deployed => "deployed",
        },
    );
    add(
        "output",
        match q.output {
            StatusOutput::Summary => "summary",
            StatusOutput::All => "all",
            StatusOutput::Detail => "detail",
        },
    );
    for a in &q.apps {
        add("app", a);
    }
    for c in &q.clusters {
        add("cluster", c.as_str());
    }
    for r in &q.resources {
        add("resource", r);
    }
    match q.mode {
        StatusMode::Full => {}
        StatusMode::Apps => pairs.push("apps".to_owned()),
        StatusMode::Clusters => pairs.push("clusters".to_owned()),
        StatusMode::Resources => pairs.push("resources".to_owned()),
    }
    pairs.join("&")
}

/// Percent-encodes a query value (`+` must not reach the server as a space).
fn encode(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Parses a status answer as the shape `mode` asks for.
///
/// # Errors
/// A message when the body is not that shape.
pub fn parse(mode: StatusMode, body: &[u8]) -> std::result::Result<StatusResponse, String> {
    let bad = |e: serde_json::Error| format!("unexpected status answer: {e}");
    Ok(match mode {
        StatusMode::Full => StatusResponse::Full(Box::new(
            serde_json::from_slice::<DigStatus>(body).map_err(bad)?,
        )),
        StatusMode::Apps => {
            StatusResponse::Apps(serde_json::from_slice::<AppsList>(body).map_err(bad)?)
        }
        StatusMode::Clusters => {
            StatusResponse::Clusters(serde_json::from_slice::<ClustersByApp>(body).map_err(bad)?)
        }
        StatusMode::Resources => {
            StatusResponse::Resources(serde_json::from_slice::<ResourcesByApp>(body).map_err(bad)?)
        }
    })
}

/// One status answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The target asked about.
    pub target: Target,
    /// The URL asked.
    pub url: String,
    /// The parsed answer, or why there is none (an error status, an unreachable server, a body
    /// of another shape).
    pub status: std::result::Result<StatusResponse, String>,
}

/// GETs the status of `target` with the query `q`.
pub async fn query(client: &Client, target: &Target, q: &StatusQuery) -> Answer {
    let path = format!("{}?{}", target.status_path(), query_string(q));
    let url = client.url(&path);
    let status = match client.send(Method::GET, &path, Body::Empty).await {
        Ok(r) if r.ok() => parse(q.mode, &r.body),
        Ok(r) => Err(refused(&r)),
        Err(e) => Err(e.to_string()),
    };
    Answer {
        target: target.clone(),
        url,
        status,
    }
}

fn refused(r: &Response) -> String {
    let body = String::from_utf8_lossy(&r.body);
    format!(
        "{} {}",
        r.status,
        body.split_whitespace().collect::<Vec<_>>().join(" ")
    )
}

/// Prints `answers` in `output`: tables, or a JSON/YAML array of
/// `{document, url, body}` (`error` instead of `body` for a failed query).
///
/// # Errors
/// A write error on `out`.
pub fn print(answers: &[Answer], output: Output, out: &mut dyn Write) -> Result<()> {
    let text = match output {
        Output::Table => answers.iter().map(table).collect::<Vec<_>>().join("\n"),
        Output::Json | Output::Yaml => {
            let all = Json::Array(
                answers
                    .iter()
                    .map(|a| {
                        let mut o = json!({"document": a.target.position, "url": a.url});
                        match &a.status {
                            Ok(s) => o["body"] = serde_json::to_value(s).unwrap_or(Json::Null),
                            Err(e) => o["error"] = Json::String(e.clone()),
                        }
                        o
                    })
                    .collect(),
            );
            crate::output::render(&all, output)?
        }
    };
    out.write_all(text.as_bytes()).map_err(CtlError::write)
}

/// The table of one answer: a heading, then one row per app and cluster (or per list entry).
fn table(answer: &Answer) -> String {
    let mut s = format!("{} ({})\n", answer.target.label(), answer.target.position);
    // Why resources failed or retry, listed under the table.
    let mut why: Vec<String> = Vec::new();
    let rows: Vec<Vec<String>> = match &answer.status {
        Err(e) => return format!("{s}  error: {e}\n"),
        Ok(StatusResponse::Full(d)) => {
            let state = d.states.actions.last().map(|a| a.state.to_string());
            let mut heading = vec![format!("state {}", state.as_deref().unwrap_or("-"))];
            if !d.totals.deployed_status.is_empty() {
                heading.push(format!("deployed {}", d.totals.deployed_status));
            }
            if !d.totals.ready_status.is_empty() {
                heading.push(format!("ready {}", d.totals.ready_status));
            }
            for counts in [&d.totals.deployed_counts, &d.totals.ready_counts] {
                if !counts.is_empty() {
                    heading.push(counts_text(counts));
                }
            }
            if !d.states.statusctxid.is_empty() {
                heading.push(format!("context {}", d.states.statusctxid));
            }
            s.push_str(&format!("  {}\n", heading.join(", ")));
            let mut rows = vec![vec![
                "APP".to_owned(),
                "CLUSTER".to_owned(),
                "CONNECTIVITY".to_owned(),
                "RESOURCES".to_owned(),
                "STATUS".to_owned(),
            ]];
            for app in &d.apps {
                for c in &app.clusters {
                    let mut counts = BTreeMap::new();
                    for r in &c.resources {
                        let st = if r.ready_status.is_empty() {
                            &r.deployed_status
                        } else {
                            &r.ready_status
                        };
                        *counts.entry(st.clone()).or_insert(0) += 1;
                        if let Some(reason) = &r.why.reason {
                            let retry = match (r.why.attempts, &r.why.next_retry) {
                                (Some(n), Some(at)) => format!(" (attempt {n}, next at {at})"),
                                _ => String::new(),
                            };
                            why.push(format!(
                                "{} {}+{} {}/{}: {} {reason}: {}{retry}",
                                app.name,
                                c.cluster_provider,
                                c.cluster,
                                r.gvk.kind,
                                r.name,
                                r.deployed_status,
                                r.why.message.as_deref().unwrap_or_default()
                            ));
                        }
                        for d in &r.drift {
                            let what = match (d.path.as_str(), d.removed) {
                                ("", _) => "the object deleted".to_owned(),
                                (path, true) => format!("{path} removed"),
                                (path, false) => format!("{path} changed"),
                            };
                            why.push(format!(
                                "{} {}+{} {}/{}: drift: {what} by {}{}",
                                app.name,
                                c.cluster_provider,
                                c.cluster,
                                r.gvk.kind,
                                r.name,
                                d.manager,
                                d.time
                                    .as_deref()
                                    .map(|t| format!(" at {t}"))
                                    .unwrap_or_default()
                            ));
                        }
                        if r.drift_corrections > 0 || !r.drift_gave_up.is_empty() {
                            let said = if r.drift_gave_up.is_empty() {
                                format!("drift corrected {} times", r.drift_corrections)
                            } else {
                                format!("drift no longer corrected: {}", r.drift_gave_up)
                            };
                            why.push(format!(
                                "{} {}+{} {}/{}: {said}",
                                app.name, c.cluster_provider, c.cluster, r.gvk.kind, r.name
                            ));
                        }
                    }
                    rows.push(vec![
                        app.name.clone(),
                        ClusterRef::new(&c.cluster_provider, &c.cluster).to_string(),
                        c.connectivity.clone(),
                        c.resources.len().to_string(),
                        counts_text(&counts),
                    ]);
                }
            }
            rows
        }
        Ok(StatusResponse::Apps(a)) => std::iter::once(vec!["APP".to_owned()])
            .chain(a.apps.iter().map(|n| vec![n.clone()]))
            .collect(),
        Ok(StatusResponse::Clusters(c)) => {
            let mut rows = vec![vec!["APP".to_owned(), "CLUSTER".to_owned()]];
            for app in &c.clusters_by_app {
                for cl in &app.clusters {
                    rows.push(vec![
                        app.app.clone(),
                        ClusterRef::new(&cl.cluster_provider, &cl.cluster).to_string(),
                    ]);
                }
            }
            rows
        }
        Ok(StatusResponse::Resources(r)) => {
            let mut rows = vec![vec![
                "APP".to_owned(),
                "CLUSTER".to_owned(),
                "RESOURCE".to_owned(),
                "KIND".to_owned(),
            ]];
            for a in &r.resources_by_app {
                for res in &a.resources {
                    rows.push(vec![
                        a.app.clone(),
                        ClusterRef::new(&a.cluster_provider, &a.cluster).to_string(),
                        res.name.clone(),
                        format!("{}.{}", res.gvk.kind, res.gvk.version),
                    ]);
                }
            }
            rows
        }
    };
    if rows.len() > 1 {
        for line in format_table(&rows).lines() {
            s.push_str("  ");
            s.push_str(line);
            s.push('\n');
        }
    }
    for line in &why {
        s.push_str(&format!("  why: {line}\n"));
    }
    s
}

fn counts_text<V: std::fmt::Display>(counts: &BTreeMap<String, V>) -> String {
    counts
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The resources of one app on one cluster, counted for progress lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cell {
    /// Whether rsync reaches the cluster (`Available`, `Retrying`, ...).
    pub connectivity: String,
    /// Resources.
    pub resources: usize,
    /// Resources applied.
    pub applied: usize,
    /// Resources ready.
    pub ready: usize,
    /// Resources that failed to apply.
    pub failed: usize,
    /// Resources being retried.
    pub retrying: usize,
}

/// Where a target is, from one `status=deployed` and one `status=ready` answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The lifecycle state (`Instantiated`, `Terminated`, ...), when the answer has a history.
    pub state: Option<DigState>,
    /// The AppContext status (`Instantiating`, `Instantiated`, ...).
    pub deployed: String,
    /// The overall ready status (`Ready`, `NotReady`), when reported.
    pub ready: String,
    /// Whether the ready answer counts resources that are not ready.
    pub not_ready: bool,
    /// Whether the object has an AppContext to report on (an admin logical cloud has none).
    pub has_context: bool,
    /// Per (app, `provider+cluster`).
    pub cells: BTreeMap<(String, String), Cell>,
}

impl Snapshot {
    /// The snapshot of a `status=deployed` answer and, when given, a `status=ready` one.
    #[must_use]
    pub fn new(deployed: &DigStatus, ready: Option<&DigStatus>) -> Self {
        let mut s = Self {
            state: deployed.states.actions.last().map(|a| a.state),
            deployed: deployed.totals.deployed_status.clone(),
            has_context: !deployed.states.statusctxid.is_empty()
                || !deployed.totals.deployed_status.is_empty(),
            ..Self::default()
        };
        for app in &deployed.apps {
            for c in &app.clusters {
                let cell = s.cell(&app.name, &c.cluster_provider, &c.cluster);
                cell.connectivity.clone_from(&c.connectivity);
                cell.resources = c.resources.len();
                for r in &c.resources {
                    match r.deployed_status.as_str() {
                        "Applied" => cell.applied += 1,
                        "Failed" => cell.failed += 1,
                        "Retrying" => cell.retrying += 1,
                        _ => {}
                    }
                }
            }
        }
        if let Some(ready) = ready {
            if s.deployed.is_empty() {
                s.deployed.clone_from(&ready.totals.deployed_status);
            }
            s.ready.clone_from(&ready.totals.ready_status);
            s.not_ready = ready
                .totals
                .ready_counts
                .iter()
                .any(|(k, v)| k != "Ready" && *v > 0);
            for app in &ready.apps {
                for c in &app.clusters {
                    let cell = s.cell(&app.name, &c.cluster_provider, &c.cluster);
                    cell.resources = cell.resources.max(c.resources.len());
                    cell.ready = c
                        .resources
                        .iter()
                        .filter(|r| r.ready_status == "Ready")
                        .count();
                }
            }
        }
        s
    }

    fn cell(&mut self, app: &str, provider: &str, cluster: &str) -> &mut Cell {
        self.cells
            .entry((
                app.to_owned(),
                ClusterRef::new(provider, cluster).to_string(),
            ))
            .or_default()
    }

    /// Resources in all, and ready.
    #[must_use]
    pub fn totals(&self) -> (usize, usize) {
        self.cells
            .values()
            .fold((0, 0), |(n, r), c| (n + c.resources, r + c.ready))
    }

    /// Whether the operation is over, and how it ended. With `require_ready`, an instantiated
    /// target must also be ready.
    #[must_use]
    pub fn verdict(&self, require_ready: bool) -> Verdict {
        let dep = self.deployed.as_str();
        let ready = self.ready == "Ready" || (self.ready.is_empty() && !self.not_ready);
        if !self.has_context {
            // Nothing was handed to rsync (an admin logical cloud): the state is the outcome.
            return match self.state {
                Some(DigState::Instantiated | DigState::Updated | DigState::Terminated) => {
                    Verdict::Succeeded
                }
                Some(s @ (DigState::InstantiateStopped | DigState::TerminateStopped)) => {
                    Verdict::Failed(s.to_string())
                }
                _ => Verdict::Pending,
            };
        }
        match self.state {
            Some(s @ (DigState::InstantiateStopped | DigState::TerminateStopped)) => {
                Verdict::Failed(format!("{s}"))
            }
            Some(DigState::Created | DigState::Approved) => Verdict::Pending,
            Some(DigState::Terminated) => match dep {
                "Terminated" => Verdict::Succeeded,
                "TerminateFailed" => Verdict::Failed(dep.to_owned()),
                _ => Verdict::Pending,
            },
            Some(DigState::Instantiated | DigState::Updated | DigState::Applied) | None => {
                match dep {
                    "InstantiateFailed" | "UpdateFailed" | "TerminateFailed" => {
                        Verdict::Failed(dep.to_owned())
                    }
                    "Instantiated" | "Updated" if !require_ready || ready => Verdict::Succeeded,
                    "Terminated" if self.state.is_none() => Verdict::Succeeded,
                    _ => Verdict::Pending,
                }
            }
        }
    }

    /// The one-line summary: state, deployed and ready status, and a bar of ready resources.
    #[must_use]
    pub fn summary(&self) -> String {
        let mut parts = vec![self.state.map_or_else(|| "-".to_owned(), |s| s.to_string())];
        if !self.deployed.is_empty() {
            parts.push(format!("deployed {}", self.deployed));
        }
        if !self.ready.is_empty() {
            parts.push(self.ready.clone());
        }
        let (n, r) = self.totals();
        let mut s = parts.join(", ");
        const WIDTH: usize = 20;
        if let Some(filled) = (r * WIDTH).checked_div(n) {
            s.push_str(&format!(
                " [{}{}] {r}/{n} ready",
                "#".repeat(filled),
                "-".repeat(WIDTH - filled)
            ));
        }
        s
    }

    /// The snapshot as JSON, for `--output json|yaml`.
    #[must_use]
    pub fn to_json(&self) -> Json {
        let apps: Vec<Json> = self
            .cells
            .iter()
            .map(|((app, cluster), c)| {
                json!({"app": app, "cluster": cluster, "connectivity": c.connectivity,
                       "resources": c.resources, "applied": c.applied, "ready": c.ready,
                       "failed": c.failed, "retrying": c.retrying})
            })
            .collect();
        json!({"state": self.state.map(|s| s.to_string()), "deployedStatus": self.deployed,
               "readyStatus": self.ready, "apps": apps})
    }
}

/// How an operation stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Still running (or not started).
    Pending,
    /// Over and successful.
    Succeeded,
    /// Over and failed, with the status saying so.
    Failed(String),
}

/// The options of [`watch`].
#[derive(Debug, Clone, Copy)]
pub struct WatchOptions {
    /// Give up after this long.
    pub timeout: Duration,
    /// Time between two polls.
    pub interval: Duration,
    /// Progress lines (table) or one JSON/YAML document per change.
    pub output: Output,
}

/// How one target ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Settled successfully.
    Succeeded,
    /// Settled in failure, or the status route answered an error.
    Failed(String),
    /// Still pending at the deadline.
    TimedOut,
}

/// Fetches one snapshot of `target`: a `status=deployed` and a `status=ready` query.
///
/// # Errors
/// The message of a query that failed, with whether retrying may help (`true` for an
/// unreachable server or a 5xx answer).
async fn snapshot(
    client: &Client,
    target: &Target,
) -> std::result::Result<Snapshot, (String, bool)> {
    let q = |status| StatusQuery {
        status,
        ..StatusQuery::default()
    };
    let fetch = |status| async move {
        let path = format!("{}?{}", target.status_path(), query_string(&q(status)));
        match client.send(Method::GET, &path, Body::Empty).await {
            Ok(r) if r.ok() => serde_json::from_slice::<DigStatus>(&r.body)
                .map_err(|e| (format!("unexpected status answer: {e}"), false)),
            Ok(r) => Err((refused(&r), r.status >= 500)),
            Err(e) => Err((e.to_string(), true)),
        }
    };
    let deployed = fetch(StatusType::Deployed).await?;
    let ready = fetch(StatusType::Ready).await?;
    Ok(Snapshot::new(&deployed, Some(&ready)))
}

/// Polls every target until each settles or the timeout passes, writing progress to `out`:
/// a summary line whenever the state, status or ready count changes and a line per app and
/// cluster whose counts changed (JSON/YAML: one document per change, then one per ending).
/// Returns each target's ending, in order.
///
/// # Errors
/// A write error on `out`.
pub async fn watch(
    client: &Client,
    targets: &[Target],
    opts: &WatchOptions,
    out: &mut dyn Write,
) -> Result<Vec<Ending>> {
    let start = Instant::now();
    let deadline = start + opts.timeout;
    let mut last: Vec<Option<Snapshot>> = vec![None; targets.len()];
    let mut endings: Vec<Option<Ending>> = vec![None; targets.len()];
    let mut reported: Vec<Option<String>> = vec![None; targets.len()];
    loop {
        for (i, target) in targets.iter().enumerate() {
            if endings[i].is_some() {
                continue;
            }
            let elapsed = start.elapsed().as_secs();
            match snapshot(client, target).await {
                Ok(snap) => {
                    progress(target, elapsed, last[i].as_ref(), &snap, opts.output, out)?;
                    match snap.verdict(true) {
                        Verdict::Pending => {}
                        Verdict::Succeeded => endings[i] = Some(Ending::Succeeded),
                        Verdict::Failed(why) => endings[i] = Some(Ending::Failed(why)),
                    }
                    last[i] = Some(snap);
                }
                Err((why, transient)) => {
                    if !transient {
                        endings[i] = Some(Ending::Failed(why));
                    } else if reported[i].as_deref() != Some(why.as_str()) {
                        // Said once; the poll goes on until the deadline.
                        event(
                            opts.output,
                            out,
                            &format!("[{elapsed:>4}s] {}: {why} (retrying)", target.label()),
                            json!({"target": target.object, "elapsed": elapsed, "error": why}),
                        )?;
                        reported[i] = Some(why);
                    }
                }
            }
            if let Some(ending) = &endings[i] {
                let elapsed = start.elapsed().as_secs();
                finish(target, elapsed, ending, last[i].as_ref(), opts, out)?;
            }
        }
        if endings.iter().all(Option::is_some) {
            break;
        }
        if Instant::now() + opts.interval > deadline {
            for (i, target) in targets.iter().enumerate() {
                if endings[i].is_none() {
                    let ending = Ending::TimedOut;
                    let elapsed = start.elapsed().as_secs();
                    finish(target, elapsed, &ending, last[i].as_ref(), opts, out)?;
                    endings[i] = Some(ending);
                }
            }
            break;
        }
        tokio::time::sleep(opts.interval).await;
    }
    Ok(endings.into_iter().flatten().collect())
}

fn progress(
    target: &Target,
    elapsed: u64,
    before: Option<&Snapshot>,
    now: &Snapshot,
    output: Output,
    out: &mut dyn Write,
) -> Result<()> {
    if before == Some(now) {
        return Ok(());
    }
    let mut doc = now.to_json();
    doc["target"] = Json::String(target.object.clone());
    doc["elapsed"] = Json::from(elapsed);
    if output != Output::Table {
        return event(output, out, "", doc);
    }
    let summary_changed = before.is_none_or(|b| {
        (b.state, &b.deployed, &b.ready, b.totals())
            != (now.state, &now.deployed, &now.ready, now.totals())
    });
    let mut lines = Vec::new();
    if summary_changed {
        lines.push(format!(
            "[{elapsed:>4}s] {}: {}",
            target.label(),
            now.summary()
        ));
    }
    for ((app, cluster), c) in &now.cells {
        if before.and_then(|b| b.cells.get(&(app.clone(), cluster.clone()))) == Some(c) {
            continue;
        }
        let mut line = format!(
            "[{elapsed:>4}s]   {app} @ {cluster}: {} resources, {} applied, {} ready",
            c.resources, c.applied, c.ready
        );
        if c.failed > 0 {
            line.push_str(&format!(", {} failed", c.failed));
        }
        if c.retrying > 0 {
            line.push_str(&format!(", {} retrying", c.retrying));
        }
        if !c.connectivity.is_empty() {
            line.push_str(&format!(" ({})", c.connectivity));
        }
        lines.push(line);
    }
    for line in lines {
        writeln!(out, "{line}").map_err(CtlError::write)?;
    }
    Ok(())
}

fn finish(
    target: &Target,
    elapsed: u64,
    ending: &Ending,
    last: Option<&Snapshot>,
    opts: &WatchOptions,
    out: &mut dyn Write,
) -> Result<()> {
    let summary = last.map(Snapshot::summary).unwrap_or_default();
    let (result, text) = match ending {
        Ending::Succeeded => ("succeeded", format!("done: {summary}")),
        Ending::Failed(why) => ("failed", format!("failed: {why}")),
        Ending::TimedOut => (
            "timeout",
            format!("timed out after {:?}: {summary}", opts.timeout),
        ),
    };
    let message = match ending {
        Ending::Failed(why) => why.clone(),
        _ => summary,
    };
    event(
        opts.output,
        out,
        &format!("[{elapsed:>4}s] {}: {text}", target.label()),
        json!({"target": target.object, "elapsed": elapsed, "result": result, "message": message}),
    )
}

/// Writes one watch event: the line for tables, one JSON line, or one YAML document.
fn event(output: Output, out: &mut dyn Write, line: &str, doc: Json) -> Result<()> {
    let text = match output {
        Output::Table => format!("{line}\n"),
        Output::Json => format!("{doc}\n"),
        Output::Yaml => format!("---\n{}", crate::output::render(&doc, Output::Yaml)?),
    };
    out.write_all(text.as_bytes()).map_err(CtlError::write)?;
    out.flush().map_err(CtlError::write)
}

/// How a wait after an accepted operation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waited {
    /// The operation settled with this AppContext status.
    Settled(String),
    /// It settled in failure (`TerminateFailed`, a stopped operation, ...).
    Failed(String),
    /// It was still running at the deadline, with its last status.
    TimedOut(String),
    /// The status route is not available for this object (the answer says why).
    Unavailable(String),
}

/// After the lifecycle operation `op` on `target` was accepted, polls its status
/// (`status=deployed&output=summary`) until the AppContext reaches a final status for `op`
/// (instantiate: Instantiated; terminate: Terminated; update, rollback, migrate: Updated or
/// Instantiated; or the matching failure), at most `timeout`. Readiness is not waited for.
pub async fn wait_operation(
    client: &Client,
    target: &Target,
    op: &str,
    timeout: Duration,
) -> Waited {
    let deadline = Instant::now() + timeout;
    let q = StatusQuery {
        status: StatusType::Deployed,
        output: StatusOutput::Summary,
        ..StatusQuery::default()
    };
    let path = format!("{}?{}", target.status_path(), query_string(&q));
    let mut delay = Duration::from_millis(200);
    let mut last: Option<String> = None;
    loop {
        let answer = match client.send(Method::GET, &path, Body::Empty).await {
            Ok(r) if r.ok() => serde_json::from_slice::<DigStatus>(&r.body)
                .map_err(|e| format!("unexpected status answer: {e}")),
            Ok(r) => Err(refused(&r)),
            Err(e) => Err(e.to_string()),
        };
        match answer {
            // No status route for this object (or an old server): nothing to wait on.
            Err(why) if last.is_none() => return Waited::Unavailable(why),
            // A later failure is transient until the deadline.
            Err(why) => last = Some(why),
            Ok(status) => {
                let snap = Snapshot::new(&status, None);
                let dep = snap.deployed;
                let (done, failed) = match op {
                    "instantiate" => (dep == "Instantiated", dep == "InstantiateFailed"),
                    "terminate" => (dep == "Terminated", dep == "TerminateFailed"),
                    _ => (
                        matches!(dep.as_str(), "Updated" | "Instantiated"),
                        matches!(dep.as_str(), "UpdateFailed" | "InstantiateFailed"),
                    ),
                };
                let without_context = !snap.has_context
                    && match op {
                        "instantiate" => snap.state == Some(DigState::Instantiated),
                        "terminate" => snap.state == Some(DigState::Terminated),
                        _ => matches!(snap.state, Some(DigState::Instantiated | DigState::Updated)),
                    };
                if without_context {
                    // Nothing was handed to rsync (an admin logical cloud): the state says it.
                    return Waited::Settled(snap.state.map(|s| s.to_string()).unwrap_or_default());
                }
                if done {
                    return Waited::Settled(dep);
                }
                if failed {
                    return Waited::Failed(dep);
                }
                if let Some(s @ (DigState::InstantiateStopped | DigState::TerminateStopped)) =
                    snap.state
                {
                    return Waited::Failed(s.to_string());
                }
                last = Some(if dep.is_empty() {
                    "no status yet".to_owned()
                } else {
                    dep
                });
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return Waited::TimedOut(last.unwrap_or_default());
        }
        tokio::time::sleep(delay.min(deadline - now)).await;
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}
