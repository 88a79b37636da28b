//! `Table` answers (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`), which `kubectl get`
//! prints as they come: name, a few columns per type, and age.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::resources::ResourceType;

/// Whether the `Accept` header asks for a table.
pub(crate) fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

fn s<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

fn n(obj: &Value, ptr: &str) -> i64 {
    obj.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

/// Seconds since the epoch of an RFC 3339 UTC timestamp written by this server.
fn parse_time(ts: &str) -> Option<u64> {
    u64::try_from(emco_core::time::parse_rfc3339(ts)?).ok()
}

/// Ages the way kubectl shows them (`45s`, `3m12s`, `5h`, `2d`).
pub(crate) fn human_age(secs: u64) -> String {
    match secs {
        0..120 => format!("{secs}s"),
        120..600 => format!("{}m{}s", secs / 60, secs % 60),
        600..10_800 => format!("{}m", secs / 60),
        10_800..172_800 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

fn age(obj: &Value) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    parse_time(s(obj, "/metadata/creationTimestamp")).map_or_else(
        || "<unknown>".to_owned(),
        |t| human_age(now.saturating_sub(t)),
    )
}

/// Column names and cells of one row, by type.
fn columns(rt: &ResourceType, obj: &Value) -> (Vec<&'static str>, Vec<Value>) {
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("apps", "deployments") => {
            let want = obj
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            (
                vec!["Ready", "Up-to-date", "Available"],
                vec![
                    json!(format!("{}/{want}", n(obj, "/status/readyReplicas"))),
                    json!(n(obj, "/status/updatedReplicas")),
                    json!(n(obj, "/status/availableReplicas")),
                ],
            )
        }
        ("", "pods") => {
            let total = obj
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let ready = obj
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .map_or(0, |c| {
                    c.iter().filter(|c| c["ready"] == json!(true)).count()
                });
            (
                vec!["Ready", "Status", "Restarts"],
                vec![
                    json!(format!("{ready}/{total}")),
                    json!(s(obj, "/status/phase")),
                    json!(0),
                ],
            )
        }
        ("", "services") => {
            let ports: Vec<String> = obj
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|p| {
                    format!(
                        "{}/{}",
                        p.get("port").map(Value::to_string).unwrap_or_default(),
                        s(p, "/protocol")
                    )
                })
                .collect();
            let external = obj
                .pointer("/status/loadBalancer/ingress/0/ip")
                .and_then(Value::as_str)
                .unwrap_or("<none>");
            (
                vec!["Type", "Cluster-IP", "External-IP", "Port(s)"],
                vec![
                    json!(s(obj, "/spec/type")),
                    json!(s(obj, "/spec/clusterIP")),
                    json!(external),
                    json!(ports.join(",")),
                ],
            )
        }
        ("batch", "jobs") => {
            let done = obj
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Complete" && c["status"] == "True")
                });
            let want = obj
                .pointer("/spec/completions")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            (
                vec!["Status", "Completions"],
                vec![
                    json!(if done { "Complete" } else { "Running" }),
                    json!(format!("{}/{want}", n(obj, "/status/succeeded"))),
                ],
            )
        }
        ("autoscaling", "horizontalpodautoscalers") => {
            // No metrics server: every current value is unknown, as on a cluster without one.
            let targets: Vec<String> = obj
                .pointer("/spec/metrics")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|m| {
                    let r = m.get("resource")?;
                    let target = &r["target"];
                    let want = target
                        .get("averageUtilization")
                        .map(|u| format!("{u}%"))
                        .or_else(|| {
                            target
                                .get("averageValue")
                                .and_then(Value::as_str)
                                .map(str::to_owned)
                        })?;
                    Some(format!(
                        "{}: <unknown>/{want}",
                        r["name"].as_str().unwrap_or_default()
                    ))
                })
                .collect();
            let min = obj
                .pointer("/spec/minReplicas")
                .map_or_else(|| json!("<unset>"), Value::clone);
            (
                vec!["Reference", "Targets", "MinPods", "MaxPods", "Replicas"],
                vec![
                    json!(format!(
                        "{}/{}",
                        s(obj, "/spec/scaleTargetRef/kind"),
                        s(obj, "/spec/scaleTargetRef/name")
                    )),
                    json!(if targets.is_empty() {
                        "<none>".to_owned()
                    } else {
                        targets.join(", ")
                    }),
                    min,
                    json!(n(obj, "/spec/maxReplicas")),
                    json!(n(obj, "/status/currentReplicas")),
                ],
            )
        }
        ("", "namespaces") => (vec!["Status"], vec![json!(s(obj, "/status/phase"))]),
        ("", "configmaps") => (
            vec!["Data"],
            vec![json!(
                obj.get("data")
                    .and_then(Value::as_object)
                    .map_or(0, serde_json::Map::len)
            )],
        ),
        ("", "secrets") => (
            vec!["Type", "Data"],
            vec![
                json!(s(obj, "/type")),
                json!(
                    obj.get("data")
                        .and_then(Value::as_object)
                        .map_or(0, serde_json::Map::len)
                ),
            ],
        ),
        _ => (Vec::new(), Vec::new()),
    }
}

/// A `Table` of `items` (each row carries the object's metadata).
pub(crate) fn table(rt: &ResourceType, items: &[Value], list_meta: &Value) -> Value {
    let names = items
        .first()
        .map_or_else(|| columns(rt, &json!({})).0, |o| columns(rt, o).0);
    let mut defs = vec![
        json!({"name": "Name", "type": "string", "format": "name", "description": "Name of the object", "priority": 0}),
    ];
    defs.extend(names.iter().map(
        |c| json!({"name": c, "type": "string", "format": "", "description": c, "priority": 0}),
    ));
    defs.push(json!({"name": "Age", "type": "string", "format": "", "description": "Time since creation", "priority": 0}));
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let mut cells = vec![json!(s(o, "/metadata/name"))];
            cells.extend(columns(rt, o).1);
            cells.push(json!(age(o)));
            json!({"cells": cells, "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                               "metadata": o.get("metadata").cloned().unwrap_or(json!({}))}})
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "columnDefinitions": defs, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::BUILTIN_TYPES;
    use emco_core::time::format_rfc3339;

    #[test]
    fn times_round_trip() {
        for t in [0i64, 951_782_400, 1_700_000_000, 1_800_000_123] {
            assert_eq!(parse_time(&format_rfc3339(t)), u64::try_from(t).ok());
        }
        assert_eq!(human_age(59), "59s");
        assert_eq!(human_age(185), "3m5s");
        assert_eq!(human_age(7200), "120m");
        assert_eq!(human_age(3 * 86_400), "3d");
    }

    #[test]
    fn deployment_rows() {
        let rt = BUILTIN_TYPES
            .iter()
            .find(|t| t.plural == "deployments")
            .unwrap();
        let d = json!({"metadata": {"name": "web"}, "spec": {"replicas": 2}, "status": {"readyReplicas": 2, "availableReplicas": 2}});
        let t = table(rt, &[d], &json!({}));
        assert_eq!(t["columnDefinitions"][1]["name"], "Ready");
        assert_eq!(t["rows"][0]["cells"][0], "web");
        assert_eq!(t["rows"][0]["cells"][1], "2/2");
        let hpa_rt = BUILTIN_TYPES
            .iter()
            .find(|t| t.plural == "horizontalpodautoscalers")
            .unwrap();
        let hpa = json!({"metadata": {"name": "web"}, "spec": {"minReplicas": 1, "maxReplicas": 5,
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}]}});
        let t = table(hpa_rt, &[hpa], &json!({}));
        let cells = &t["rows"][0]["cells"];
        assert_eq!(
            (&cells[1], &cells[2], &cells[3], &cells[4], &cells[5]),
            (
                &json!("Deployment/web"),
                &json!("cpu: <unknown>/80%"),
                &json!(1),
                &json!(5),
                &json!(0)
            )
        );
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        ));
    }
}
