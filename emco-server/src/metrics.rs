//! Request counts and latencies per route, in Prometheus text format.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;

/// Latency bucket bounds, seconds.
const BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0];

#[derive(Debug, Default, Clone)]
struct Series {
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// `(method, route, status)`.
type SeriesKey = (String, String, u16);

/// The request metrics of the server, shared by the middleware and `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    inner: Arc<Mutex<BTreeMap<SeriesKey, Series>>>,
}

impl Metrics {
    /// Empty metrics.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn record(&self, method: &str, route: &str, status: u16, seconds: f64) {
        // A poisoned lock only means another request panicked mid-update; keep counting.
        let mut map = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let s = map
            .entry((method.to_owned(), route.to_owned(), status))
            .or_default();
        s.count += 1;
        s.sum += seconds;
        for (i, bound) in BUCKETS.iter().enumerate() {
            if seconds <= *bound {
                s.buckets[i] += 1;
            }
        }
    }

    /// The Prometheus text exposition.
    #[must_use]
    pub fn render(&self) -> String {
        let map = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let mut out = String::new();
        out.push_str(
            "# HELP emco_http_requests_total HTTP requests by method, route and status.\n",
        );
        out.push_str("# TYPE emco_http_requests_total counter\n");
        for ((method, route, status), s) in &map {
            let _ = writeln!(
                out,
                "emco_http_requests_total{{method=\"{method}\",route=\"{route}\",status=\"{status}\"}} {}",
                s.count
            );
        }
        out.push_str("# HELP emco_http_request_duration_seconds HTTP request latency.\n");
        out.push_str("# TYPE emco_http_request_duration_seconds histogram\n");
        for ((method, route, status), s) in &map {
            let labels = format!("method=\"{method}\",route=\"{route}\",status=\"{status}\"");
            for (bound, n) in BUCKETS.iter().zip(s.buckets) {
                let _ = writeln!(
                    out,
                    "emco_http_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "emco_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                s.count
            );
            let _ = writeln!(
                out,
                "emco_http_request_duration_seconds_sum{{{labels}}} {}",
                s.sum
            );
            let _ = writeln!(
                out,
                "emco_http_request_duration_seconds_count{{{labels}}} {}",
                s.count
            );
        }
        out
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
