//! The server's Prometheus metrics: request counts and latencies per route, the process's own
//! figures (descriptors, resident memory, live async tasks: what a long run watches for
//! leaks), plus what rsync and the controller registry record (see `emco_rsync::metrics` and
//! `emco_controller_sdk::client::ControllerMetrics`), all on `/metrics`.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use emco_runtime::metrics::{Counter, Family, Gauge, Histogram, LATENCY_BUCKETS, render};

#[derive(Debug)]
struct Http {
    requests: Counter,
    duration: Histogram,
    /// Read when scraped.
    open_fds: Gauge,
    resident: Gauge,
    tasks: Gauge,
}

/// The request metrics of the server, shared by the middleware and `/metrics`.
#[derive(Debug, Clone)]
pub struct Metrics {
    http: Arc<Http>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            http: Arc::new(Http {
                requests: Counter::new(
                    "emco_http_requests_total",
                    "HTTP requests by method, route and status.",
                    &["method", "route", "status"],
                ),
                duration: Histogram::new(
                    "emco_http_request_duration_seconds",
                    "HTTP request latency.",
                    &["method", "route", "status"],
                    LATENCY_BUCKETS,
                ),
                open_fds: Gauge::new("process_open_fds", "Open file descriptors.", &[]),
                resident: Gauge::new(
                    "process_resident_memory_bytes",
                    "Resident memory size in bytes.",
                    &[],
                ),
                tasks: Gauge::new(
                    "emco_runtime_alive_tasks",
                    "Async tasks alive in the server's runtime.",
                    &[],
                ),
            }),
        }
    }
}

impl Metrics {
    /// Empty metrics.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn record(&self, method: &str, route: &str, status: u16, seconds: f64) {
        let status = status.to_string();
        let labels = [method, route, status.as_str()];
        self.http.requests.inc(&labels);
        self.http.duration.observe(&labels, seconds);
    }

    /// The Prometheus text exposition of the HTTP families and `more` (rsync's, the
    /// controllers').
    #[must_use]
    pub fn render(&self, more: &[&dyn Family]) -> String {
        let http = &self.http;
        // Linux's view of the process; elsewhere these series are left out.
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            #[allow(clippy::cast_precision_loss)] // far fewer than 2^52 descriptors
            http.open_fds.set(&[], fds.count() as f64);
        }
        if let Some(kib) = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| resident_kib(&s))
        {
            #[allow(clippy::cast_precision_loss)] // far below 2^52 bytes
            http.resident.set(&[], (kib * 1024) as f64);
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            #[allow(clippy::cast_precision_loss)] // far fewer than 2^52 tasks
            http.tasks
                .set(&[], runtime.metrics().num_alive_tasks() as f64);
        }
        let mut families: Vec<&dyn Family> = vec![
            &http.requests,
            &http.duration,
            &http.open_fds,
            &http.resident,
            &http.tasks,
        ];
        families.extend_from_slice(more);
        render(&families)
    }
}

/// `VmRSS` of a `/proc/<pid>/status` text, in KiB.
fn resident_kib(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// The middleware: times each request and records it under its route pattern (never the raw
/// path, so the number of series stays bounded).
pub(crate) async fn track(State(metrics): State<Metrics>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = req.method().as_str().to_owned();
    let start = Instant::now();
    let resp = next.run(req).await;
    metrics.record(
        &method,
        &route,
        resp.status().as_u16(),
        start.elapsed().as_secs_f64(),
    );
    tracing::info!(%method, %route, status = resp.status().as_u16(), ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX), "request");
    resp
}
