//! A small Prometheus kit: counter, gauge and histogram families with labels, rendered in the
//! text exposition format (version 0.0.4). There is no global registry: each component owns its
//! families (the HTTP layer, rsync, the controller registry) and the server renders them all on
//! `/metrics`, so two orchestrators in one process (tests, embedders) never mix their figures.
//!
//! ```
//! use emco_runtime::metrics::{Counter, Family, render};
//!
//! let applied = Counter::new("emco_rsync_resources_applied_total", "Resources applied.", &["cluster"]);
//! applied.inc(&["p+c1"]);
//! applied.add(&["p+c1"], 2);
//! assert_eq!(applied.get(&["p+c1"]), 3);
//! let text = render(&[&applied as &dyn Family]);
//! assert!(text.contains("emco_rsync_resources_applied_total{cluster=\"p+c1\"} 3\n"));
//! ```

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

use emco_core::poison::lock;

/// Latency bucket bounds in seconds, from a millisecond to a minute.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// A family that renders itself.
pub trait Family: Send + Sync {
    /// Appends the family's `# HELP`, `# TYPE` and sample lines to `out`.
    fn render(&self, out: &mut String);
}

/// The text exposition of `families`, in order.
#[must_use]
pub fn render(families: &[&dyn Family]) -> String {
    let mut out = String::new();
    for f in families {
        f.render(&mut out);
    }
    out
}

#[derive(Debug)]
struct Desc {
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
}

impl Desc {
    fn head(&self, out: &mut String, kind: &str) {
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} {kind}", self.name);
    }

    /// `{a="x",b="y"}` (empty without labels), with `extra` (`le`) last.
    fn labels(&self, values: &[String], extra: Option<(&str, &str)>) -> String {
        let mut pairs: Vec<String> = self
            .labels
            .iter()
            .zip(values)
            .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
            .collect();
        if let Some((k, v)) = extra {
            pairs.push(format!("{k}=\"{v}\""));
        }
        if pairs.is_empty() {
            String::new()
        } else {
            format!("{{{}}}", pairs.join(","))
        }
    }

    /// The label values as a key; a call with the wrong number of values is a programming error
    /// that must not take the process down: missing values are empty, extra ones dropped.
    fn key(&self, values: &[&str]) -> Vec<String> {
        (0..self.labels.len())
            .map(|i| values.get(i).copied().unwrap_or_default().to_owned())
            .collect()
    }
}

/// A label value as the exposition format quotes it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The series of one family by label values.
#[derive(Debug)]
struct Series<T> {
    desc: Desc,
    series: Mutex<BTreeMap<Vec<String>, T>>,
}

impl<T: Default> Series<T> {
    const fn new(name: &'static str, help: &'static str, labels: &'static [&'static str]) -> Self {
        Self {
            desc: Desc { name, help, labels },
            series: Mutex::new(BTreeMap::new()),
        }
    }

    /// Runs `f` on the series of `values`, made empty when it is new.
    fn update<R>(&self, values: &[&str], f: impl FnOnce(&mut T) -> R) -> R {
        f(lock(&self.series).entry(self.desc.key(values)).or_default())
    }

    /// Reads the series of `values`, if it exists.
    fn read<R>(&self, values: &[&str], f: impl FnOnce(&T) -> R) -> Option<R> {
        lock(&self.series).get(&self.desc.key(values)).map(f)
    }

    /// Renders the head, then `line(name, labels, value)` for each series.
    fn render(&self, out: &mut String, kind: &str, line: impl Fn(&mut String, &[String], &T)) {
        self.desc.head(out, kind);
        for (values, v) in lock(&self.series).iter() {
            line(out, values, v);
        }
    }
}

/// A counter family: values only go up.
#[derive(Debug)]
pub struct Counter(Series<u64>);

impl Counter {
    /// A family named `name` with the label names `labels`.
    #[must_use]
    pub const fn new(
        name: &'static str,
        help: &'static str,
        labels: &'static [&'static str],
    ) -> Self {
        Self(Series::new(name, help, labels))
    }

    /// Adds one to the series of `values`.
    pub fn inc(&self, values: &[&str]) {
        self.add(values, 1);
    }

    /// Adds `n` to the series of `values`.
    pub fn add(&self, values: &[&str], n: u64) {
        self.0.update(values, |v| *v += n);
    }

    /// The value of the series of `values` (0 when it has none).
    #[must_use]
    pub fn get(&self, values: &[&str]) -> u64 {
        self.0.read(values, |v| *v).unwrap_or(0)
    }
}

impl Family for Counter {
    fn render(&self, out: &mut String) {
        let d = &self.0.desc;
        self.0.render(out, "counter", |out, values, n| {
            let _ = writeln!(out, "{}{} {n}", d.name, d.labels(values, None));
        });
    }
}

/// A gauge family: values go up and down, and a series can be removed (a context that ended).
#[derive(Debug)]
pub struct Gauge(Series<f64>);

impl Gauge {
    /// A family named `name` with the label names `labels`.
    #[must_use]
    pub const fn new(
        name: &'static str,
        help: &'static str,
        labels: &'static [&'static str],
    ) -> Self {
        Self(Series::new(name, help, labels))
    }

    /// Sets the series of `values` to `v`.
    pub fn set(&self, values: &[&str], v: f64) {
        self.0.update(values, |old| *old = v);
    }

    /// Adds `delta` (negative to lower it) to the series of `values`.
    pub fn add(&self, values: &[&str], delta: f64) {
        self.0.update(values, |v| *v += delta);
    }

    /// Drops the series of `values`.
    pub fn remove(&self, values: &[&str]) {
        lock(&self.0.series).remove(&self.0.desc.key(values));
    }

    /// The value of the series of `values`, if it has one.
    #[must_use]
    pub fn get(&self, values: &[&str]) -> Option<f64> {
        self.0.read(values, |v| *v)
    }
}

impl Family for Gauge {
    fn render(&self, out: &mut String) {
        let d = &self.0.desc;
        self.0.render(out, "gauge", |out, values, v| {
            let _ = writeln!(out, "{}{} {v}", d.name, d.labels(values, None));
        });
    }
}

#[derive(Debug, Clone, Default)]
struct Observed {
    /// Per bucket (not cumulative); rendered cumulative.
    buckets: Vec<u64>,
    count: u64,
    sum: f64,
}

/// A histogram family of durations in seconds.
#[derive(Debug)]
pub struct Histogram {
    series: Series<Observed>,
    bounds: &'static [f64],
}

impl Histogram {
    /// A family named `name` with the label names `labels` and the bucket upper bounds
    /// `bounds` (ascending; [`LATENCY_BUCKETS`] for latencies).
    #[must_use]
    pub const fn new(
        name: &'static str,
        help: &'static str,
        labels: &'static [&'static str],
        bounds: &'static [f64],
    ) -> Self {
        Self {
            series: Series::new(name, help, labels),
            bounds,
        }
    }

    /// Records `seconds` in the series of `values`.
    pub fn observe(&self, values: &[&str], seconds: f64) {
        let bucket = self.bounds.iter().position(|b| seconds <= *b);
        self.series.update(values, |s| {
            if s.buckets.len() != self.bounds.len() {
                s.buckets = vec![0; self.bounds.len()];
            }
            if let Some(i) = bucket {
                s.buckets[i] += 1;
            }
            s.count += 1;
            s.sum += seconds;
        });
    }

    /// How many observations the series of `values` has.
    #[must_use]
    pub fn count(&self, values: &[&str]) -> u64 {
        self.series.read(values, |s| s.count).unwrap_or(0)
    }
}

impl Family for Histogram {
    fn render(&self, out: &mut String) {
        let d = &self.series.desc;
        let name = d.name;
        self.series.render(out, "histogram", |out, values, s| {
            let mut cumulative = 0;
            for (bound, n) in self.bounds.iter().zip(&s.buckets) {
                cumulative += n;
                let le = bound.to_string();
                let labels = d.labels(values, Some(("le", &le)));
                let _ = writeln!(out, "{name}_bucket{labels} {cumulative}");
            }
            let labels = d.labels(values, Some(("le", "+Inf")));
            let _ = writeln!(out, "{name}_bucket{labels} {}", s.count);
            let labels = d.labels(values, None);
            let _ = writeln!(out, "{name}_sum{labels} {}", s.sum);
            let _ = writeln!(out, "{name}_count{labels} {}", s.count);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_renders_cumulative_buckets_with_sum_and_count() {
        let h = Histogram::new("t_seconds", "Test.", &["op"], &[0.1, 1.0]);
        h.observe(&["apply"], 0.05);
        h.observe(&["apply"], 0.5);
        h.observe(&["apply"], 7.0);
        let text = render(&[&h as &dyn Family]);
        assert_eq!(
            text,
            "# HELP t_seconds Test.\n# TYPE t_seconds histogram\n\
             t_seconds_bucket{op=\"apply\",le=\"0.1\"} 1\n\
             t_seconds_bucket{op=\"apply\",le=\"1\"} 2\n\
             t_seconds_bucket{op=\"apply\",le=\"+Inf\"} 3\n\
             t_seconds_sum{op=\"apply\"} 7.55\n\
             t_seconds_count{op=\"apply\"} 3\n"
        );
        assert_eq!(h.count(&["apply"]), 3);
    }

    #[test]
    fn gauges_go_both_ways_and_series_can_be_dropped() {
        let g = Gauge::new("g", "Gauge.", &["ctx"]);
        g.add(&["1"], 3.0);
        g.add(&["1"], -1.0);
        g.set(&["2"], 1.0);
        assert_eq!(g.get(&["1"]), Some(2.0));
        g.remove(&["2"]);
        let text = render(&[&g as &dyn Family]);
        assert!(text.ends_with("# TYPE g gauge\ng{ctx=\"1\"} 2\n"), "{text}");
    }

    #[test]
    fn label_values_are_escaped_and_a_wrong_arity_does_not_panic() {
        let c = Counter::new("c_total", "Counter.", &["a", "b"]);
        c.inc(&["say \"hi\"\\\n"]);
        c.inc(&["x", "y", "z"]);
        let text = render(&[&c as &dyn Family]);
        assert!(
            text.contains("c_total{a=\"say \\\"hi\\\"\\\\\\n\",b=\"\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("c_total{a=\"x\",b=\"y\"} 1\n"), "{text}");
    }
}
