//! The audit log: one record per mutating REST call (POST, PUT, PATCH, DELETE), whatever its
//! answer: when, who, from where, what (method and path with its query) and the result (status
//! and duration). Every record goes to the log (target `audit`) and, with `--audit-log FILE`,
//! as one JSON line appended to the file, written before the answer leaves, so an answered
//! call is on file.
//!
//! Who: the principal the guard authenticated (`anonymous` in the open mode), or
//! `unauthenticated` for a call refused without valid credentials.

use std::io::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use emco_core::Error;
use emco_orchestrator::auth::Principal;

use crate::tls::Peer;
use serde_json::json;

/// Where audit records go besides the log.
#[derive(Debug, Clone, Default)]
pub struct Audit {
    file: Option<Arc<Mutex<std::fs::File>>>,
}

impl Audit {
    /// Records to the log only.
    #[must_use]
    pub fn log_only() -> Self {
        Self::default()
    }

    /// Records to the log and appends them to `path` (created if missing).
    ///
    /// # Errors
    /// InvalidArgument when the file cannot be opened for appending.
    pub fn to_file(path: &Path) -> Result<Self, Error> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| {
                Error::invalid(format!("cannot open the audit log {}", path.display()))
                    .with_source(e)
            })?;
        Ok(Self {
            file: Some(Arc::new(Mutex::new(file))),
        })
    }

    fn write(&self, line: &str) {
        let Some(file) = &self.file else { return };
        // One write of a whole line: appends from several requests never interleave.
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        let written = file
            .lock()
            .map_err(|_| std::io::Error::other("the audit log's lock is poisoned"))
            .and_then(|mut f| f.write_all(&buf));
        if let Err(e) = written {
            tracing::error!(target: "audit", error = %e, record = line, "cannot append to the audit log");
        }
    }
}

/// Whether `method` changes something.
fn mutating(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

/// The middleware: records every mutating call once it is answered.
pub(crate) async fn record(State(audit): State<Audit>, req: Request, next: Next) -> Response {
    if !mutating(req.method()) {
        return next.run(req).await;
    }
    let remote = req
        .extensions()
        .get::<ConnectInfo<Peer>>()
        .map(|c| c.0.addr.to_string());
    let method = req.method().as_str().to_owned();
    let path = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.uri().path().to_owned(), |p| p.as_str().to_owned());
    let time = emco_core::time::rfc3339(SystemTime::now());
    let start = Instant::now();
    let resp = next.run(req).await;
    // The guard inside puts who it authenticated on the answer; none: refused unauthenticated.
    let who = resp
        .extensions()
        .get::<Principal>()
        .map_or_else(|| "unauthenticated".to_owned(), |p| p.subject().to_owned());
    let status = resp.status().as_u16();
    let ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    tracing::info!(target: "audit", %who, remote = remote.as_deref().unwrap_or("-"), %method, %path, status, ms, "audit");
    let line = json!({"time": time, "who": who, "remote": remote, "method": method,
        "path": path, "status": status, "ms": ms});
    audit.write(&line.to_string());
    resp
}
