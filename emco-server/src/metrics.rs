//! The server's Prometheus metrics: request counts and latencies per route, plus what rsync and
//! the controller registry record (see `emco_rsync::metrics` and
//! `emco_controller_sdk::client::ControllerMetrics`), all on `/metrics`.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use emco_core::metrics::{Counter, Family, Histogram, LATENCY_BUCKETS, render};

#[derive(Debug)]
struct Http {
    requests: Counter,
    duration: Histogram,
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
        let mut families: Vec<&dyn Family> = vec![&self.http.requests, &self.http.duration];
        families.extend_from_slice(more);
        render(&families)
    }
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
