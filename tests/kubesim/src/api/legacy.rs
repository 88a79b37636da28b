//! The beta API versions a Kubernetes 1.20-1.21 API server still served next to the v1 ones
//! (`rbac.authorization.k8s.io/v1beta1`, `apiextensions.k8s.io/v1beta1`, ...), so that charts
//! of that era install unchanged.
//!
//! As in the real server, a legacy version is another view of the same storage: a request to it
//! is converted to the storage version, served there, and every object in the answer (single
//! objects, list items, watch events) is converted back. Objects created through one version are
//! thus readable through the other. Discovery lists the legacy versions after v1, which stays the
//! preferred version. `policy/v1beta1` PodSecurityPolicy, which never had a v1, is an ordinary
//! built-in type (see `resources.rs`).
//!
//! The module is a child of `api` so that it can rebuild requests and reuse the verbs.

use std::sync::{Arc, LazyLock};

use bytes::Bytes;
use http::header;
use http_body_util::BodyExt;
use serde_json::{Map, Value, json};

use super::{ApiResult, Req, resource};
use crate::cluster::Cluster;
use crate::resources::{BUILTIN_TYPES, ResourceType};

/// (group, legacy version, plural, storage group, storage version).
const LEGACY: &[(&str, &str, &str, &str, &str)] = &[
    (
        "rbac.authorization.k8s.io",
        "v1beta1",
        "clusterrolebindings",
        "rbac.authorization.k8s.io",
        "v1",
    ),
    (
        "rbac.authorization.k8s.io",
        "v1beta1",
        "clusterroles",
        "rbac.authorization.k8s.io",
        "v1",
    ),
    (
        "rbac.authorization.k8s.io",
        "v1beta1",
        "rolebindings",
        "rbac.authorization.k8s.io",
        "v1",
    ),
    (
        "rbac.authorization.k8s.io",
        "v1beta1",
        "roles",
        "rbac.authorization.k8s.io",
        "v1",
    ),
    (
        "apiextensions.k8s.io",
        "v1beta1",
        "customresourcedefinitions",
        "apiextensions.k8s.io",
        "v1",
    ),
    (
        "admissionregistration.k8s.io",
        "v1beta1",
        "mutatingwebhookconfigurations",
        "admissionregistration.k8s.io",
        "v1",
    ),
    (
        "admissionregistration.k8s.io",
        "v1beta1",
        "validatingwebhookconfigurations",
        "admissionregistration.k8s.io",
        "v1",
    ),
    ("policy", "v1beta1", "poddisruptionbudgets", "policy", "v1"),
    ("batch", "v1beta1", "cronjobs", "batch", "v1"),
    (
        "networking.k8s.io",
        "v1beta1",
        "ingresses",
        "networking.k8s.io",
        "v1",
    ),
    (
        "networking.k8s.io",
        "v1beta1",
        "ingressclasses",
        "networking.k8s.io",
        "v1",
    ),
    (
        "extensions",
        "v1beta1",
        "ingresses",
        "networking.k8s.io",
        "v1",
    ),
    (
        "coordination.k8s.io",
        "v1beta1",
        "leases",
        "coordination.k8s.io",
        "v1",
    ),
    (
        "scheduling.k8s.io",
        "v1beta1",
        "priorityclasses",
        "scheduling.k8s.io",
        "v1",
    ),
    (
        "storage.k8s.io",
        "v1beta1",
        "storageclasses",
        "storage.k8s.io",
        "v1",
    ),
    (
        "storage.k8s.io",
        "v1beta1",
        "csidrivers",
        "storage.k8s.io",
        "v1",
    ),
    (
        "discovery.k8s.io",
        "v1beta1",
        "endpointslices",
        "discovery.k8s.io",
        "v1",
    ),
    ("events.k8s.io", "v1beta1", "events", "events.k8s.io", "v1"),
    // kubectl autoscale (up to 1.32 at least) still writes v1.
    (
        "autoscaling",
        "v1",
        "horizontalpodautoscalers",
        "autoscaling",
        "v2",
    ),
    (
        "certificates.k8s.io",
        "v1beta1",
        "certificatesigningrequests",
        "certificates.k8s.io",
        "v1",
    ),
];

/// The legacy types, served after the built-in ones.
pub(super) static TYPES: LazyLock<Vec<Arc<ResourceType>>> = LazyLock::new(|| {
    LEGACY
        .iter()
        .filter_map(|&(group, version, plural, sg, sv)| {
            let stored = BUILTIN_TYPES
                .iter()
                .find(|t| t.group == sg && t.version == sv && t.plural == plural)?;
            let mut rt = ResourceType::clone(stored);
            group.clone_into(&mut rt.group);
            version.clone_into(&mut rt.version);
            Some(Arc::new(rt))
        })
        .collect()
});

/// The storage (group, version) of a legacy type.
fn storage(rt: &ResourceType) -> Option<(&'static str, &'static str)> {
    LEGACY
        .iter()
        .find(|(g, v, p, ..)| *g == rt.group && *v == rt.version && *p == rt.plural)
        .map(|&(.., sg, sv)| (sg, sv))
}

fn api_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    }
}

/// Serves a request to a legacy version through its storage version; `None` when `rt` is not a
/// legacy view.
pub(super) fn serve(
    cluster: &Arc<Cluster>,
    types: &[Arc<ResourceType>],
    rt: &ResourceType,
    rest: &[&str],
    r: &Req,
) -> Option<ApiResult> {
    let (sg, sv) = storage(rt)?;
    let conv = Conversion {
        legacy: rt.api_version(),
        stored: api_version(sg, sv),
        kind: rt.kind.clone(),
        plural: rt.plural.clone(),
    };
    Some(serve_as(cluster, types, conv, (sg, sv), rest, r))
}

fn serve_as(
    cluster: &Arc<Cluster>,
    types: &[Arc<ResourceType>],
    conv: Conversion,
    (sg, sv): (&str, &str),
    rest: &[&str],
    r: &Req,
) -> ApiResult {
    let mut headers = r.headers.clone();
    let body = if r.body.is_empty() || !matches!(r.method.as_str(), "POST" | "PUT" | "PATCH") {
        r.body.clone()
    } else {
        let ct = r.header(header::CONTENT_TYPE).to_owned();
        let mut v = r.json_body()?;
        if r.method.as_str() != "PATCH" || ct.starts_with("application/apply-patch") {
            conv.to_stored(&mut v);
        } else if let Some(o) = v.as_object_mut() {
            // A merge patch may name the version; JSON patches do not carry one.
            if o.get("apiVersion").and_then(Value::as_str) == Some(conv.legacy.as_str()) {
                o.insert("apiVersion".to_owned(), json!(conv.stored));
            }
        }
        if ct.contains("protobuf") {
            // Decoded above; the verbs get it as JSON.
            headers.insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/json"),
            );
        }
        Bytes::from(v.to_string())
    };
    let req = Req {
        cert_user: r.cert_user.clone(),
        method: r.method.clone(),
        headers,
        query: r.query.clone(),
        body,
    };
    let resp = resource(cluster, types, (sg, sv), rest, None, &req)?;
    let conv = Arc::new(conv);
    Ok(resp.map(|b| {
        b.map_frame(move |f| f.map_data(|d| conv.data_to_legacy(&d)))
            .boxed_unsync()
    }))
}

/// How objects of one legacy type convert to and from their storage version.
struct Conversion {
    /// `group/version` of the legacy view.
    legacy: String,
    /// `group/version` objects are stored in.
    stored: String,
    kind: String,
    plural: String,
}

impl Conversion {
    /// A written object (or apply patch) of the legacy version, in the storage version.
    fn to_stored(&self, v: &mut Value) {
        let Some(o) = v.as_object_mut() else { return };
        if o.get("apiVersion").and_then(Value::as_str) == Some(self.legacy.as_str()) {
            o.insert("apiVersion".to_owned(), json!(self.stored));
        }
        match self.plural.as_str() {
            "customresourcedefinitions" => crd_to_v1(o),
            "ingresses" => ingress_to_v1(o),
            "horizontalpodautoscalers" => hpa_to_v2(o),
            "mutatingwebhookconfigurations" | "validatingwebhookconfigurations" => {
                webhooks_to_v1(o);
            }
            // v1beta1 defaulted the signer, v1 requires it.
            "certificatesigningrequests" => {
                if let Some(spec) = spec_mut(o) {
                    spec.entry("signerName")
                        .or_insert_with(|| json!("kubernetes.io/legacy-unknown"));
                }
            }
            _ => {}
        }
    }

    /// One frame of an answer: a whole document, or watch events one a line. Frames that are
    /// not JSON (protobuf, tables are JSON but hold no objects of the type) pass unchanged.
    fn data_to_legacy(&self, d: &Bytes) -> Bytes {
        let Ok(text) = std::str::from_utf8(d) else {
            return d.clone();
        };
        let mut out = String::with_capacity(text.len() + 16);
        for line in text.split_inclusive('\n') {
            let body = line.trim_end_matches('\n');
            if body.trim().is_empty() {
                out.push_str(line);
                continue;
            }
            let Ok(mut v) = serde_json::from_str::<Value>(body) else {
                return d.clone();
            };
            self.to_legacy(&mut v);
            out.push_str(&v.to_string());
            if line.ends_with('\n') {
                out.push('\n');
            }
        }
        Bytes::from(out)
    }

    /// Converts the objects of the type in an answer (object, list, watch event) to the legacy
    /// version.
    fn to_legacy(&self, v: &mut Value) {
        let Some(o) = v.as_object_mut() else { return };
        if o_has_type(o) {
            if let Some(obj) = o.get_mut("object") {
                self.to_legacy(obj);
            }
            return;
        }
        let av = o.get("apiVersion").and_then(Value::as_str) == Some(self.stored.as_str());
        let kind = o.get("kind").and_then(Value::as_str).unwrap_or_default();
        if av && kind == format!("{}List", self.kind) {
            o.insert("apiVersion".to_owned(), json!(self.legacy));
            for item in o
                .get_mut("items")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                self.to_legacy(item);
            }
        } else if av && kind == self.kind {
            o.insert("apiVersion".to_owned(), json!(self.legacy));
            match self.plural.as_str() {
                "customresourcedefinitions" => crd_to_v1beta1(o),
                "ingresses" => ingress_to_v1beta1(o),
                "horizontalpodautoscalers" => hpa_to_v1(o),
                _ => {}
            }
        }
    }
}

/// autoscaling/v1 HPA to v2: the CPU target becomes a Resource metric.
fn hpa_to_v2(o: &mut Map<String, Value>) {
    if let Some(spec) = spec_mut(o)
        && let Some(cpu) = spec.remove("targetCPUUtilizationPercentage")
    {
        spec.insert(
            "metrics".to_owned(),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": cpu}}}]),
        );
    }
    if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut)
        && let Some(cpu) = status.remove("currentCPUUtilizationPercentage")
    {
        status.insert(
            "currentMetrics".to_owned(),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "current": {"averageUtilization": cpu}}}]),
        );
    }
}

/// autoscaling/v2 HPA to v1: only a CPU utilization target has a v1 form; the other metrics,
/// `behavior` and conditions are left out (the real server keeps them in annotations).
fn hpa_to_v1(o: &mut Map<String, Value>) {
    let cpu = |metrics: Option<Value>, field: &str| {
        metrics
            .as_ref()
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|m| m["type"] == "Resource" && m["resource"]["name"] == "cpu")
            .find_map(|m| m["resource"][field].get("averageUtilization").cloned())
    };
    if let Some(spec) = spec_mut(o) {
        spec.remove("behavior");
        if let Some(u) = cpu(spec.remove("metrics"), "target") {
            spec.insert("targetCPUUtilizationPercentage".to_owned(), u);
        }
    }
    if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
        status.remove("conditions");
        if let Some(u) = cpu(status.remove("currentMetrics"), "current") {
            status.insert("currentCPUUtilizationPercentage".to_owned(), u);
        }
    }
}

/// Whether an object is a watch event (`type` and `object`).
fn o_has_type(o: &Map<String, Value>) -> bool {
    o.get("type").is_some_and(Value::is_string) && o.len() == 2
}

fn spec_mut(o: &mut Map<String, Value>) -> Option<&mut Map<String, Value>> {
    o.get_mut("spec").and_then(Value::as_object_mut)
}

fn rename(o: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(v) = o.remove(from) {
        o.insert(to.to_owned(), v);
    }
}

fn rename_columns(version: &mut Value, from: &str, to: &str) {
    for col in version
        .get_mut("additionalPrinterColumns")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        rename(col, from, to);
    }
}

/// v1beta1 CRD to v1: the top-level `version`, `validation`, `subresources` and
/// `additionalPrinterColumns` move into every version that does not set its own; a version
/// without a schema keeps every field (v1beta1 did not prune without one).
fn crd_to_v1(o: &mut Map<String, Value>) {
    let Some(spec) = spec_mut(o) else { return };
    let top_version = spec.remove("version");
    let schema = spec.remove("validation");
    let subresources = spec.remove("subresources");
    let columns = spec.remove("additionalPrinterColumns");
    let mut versions = match spec.remove("versions") {
        Some(Value::Array(vs)) if !vs.is_empty() => vs,
        _ => match top_version {
            Some(name) => vec![json!({"name": name, "served": true, "storage": true})],
            None => Vec::new(),
        },
    };
    for v in &mut versions {
        let Some(vo) = v.as_object_mut() else {
            continue;
        };
        if !vo.contains_key("schema") {
            let s = schema.clone().unwrap_or_else(|| {
                json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}})
            });
            vo.insert("schema".to_owned(), s);
        }
        if let Some(s) = subresources
            .as_ref()
            .filter(|_| !vo.contains_key("subresources"))
        {
            vo.insert("subresources".to_owned(), s.clone());
        }
        if let Some(c) = columns
            .as_ref()
            .filter(|_| !vo.contains_key("additionalPrinterColumns"))
        {
            vo.insert("additionalPrinterColumns".to_owned(), c.clone());
        }
        rename_columns(v, "JSONPath", "jsonPath");
    }
    spec.insert("versions".to_owned(), Value::Array(versions));
    if let Some(conv) = spec.get_mut("conversion").and_then(Value::as_object_mut) {
        let client = conv.remove("webhookClientConfig");
        let review = conv.remove("conversionReviewVersions");
        if client.is_some() || review.is_some() {
            let mut webhook = Map::new();
            if let Some(c) = client {
                webhook.insert("clientConfig".to_owned(), c);
            }
            webhook.insert(
                "conversionReviewVersions".to_owned(),
                review.unwrap_or_else(|| json!(["v1beta1"])),
            );
            conv.insert("webhook".to_owned(), Value::Object(webhook));
        }
    }
}

/// v1 CRD to v1beta1: `version` names the first version, and a schema, subresources or columns
/// all versions share move to the top level (v1beta1 rejects identical per-version values).
fn crd_to_v1beta1(o: &mut Map<String, Value>) {
    let Some(spec) = spec_mut(o) else { return };
    let Some(versions) = spec.get_mut("versions").and_then(Value::as_array_mut) else {
        return;
    };
    let first = versions.first().and_then(|v| v.get("name")).cloned();
    let mut hoisted = Vec::new();
    for (field, top) in [
        ("schema", "validation"),
        ("subresources", "subresources"),
        ("additionalPrinterColumns", "additionalPrinterColumns"),
    ] {
        let Some(shared) = versions.first().and_then(|v| v.get(field)).cloned() else {
            continue;
        };
        if versions.iter().all(|v| v.get(field) == Some(&shared)) {
            for v in versions.iter_mut().filter_map(Value::as_object_mut) {
                v.remove(field);
            }
            hoisted.push((top, shared));
        }
    }
    for v in versions.iter_mut() {
        rename_columns(v, "jsonPath", "JSONPath");
    }
    for (top, mut v) in hoisted {
        if top == "additionalPrinterColumns" {
            for col in v
                .as_array_mut()
                .into_iter()
                .flatten()
                .filter_map(Value::as_object_mut)
            {
                rename(col, "jsonPath", "JSONPath");
            }
        }
        spec.insert(top.to_owned(), v);
    }
    if let Some(name) = first {
        spec.insert("version".to_owned(), name);
    }
    if let Some(conv) = spec.get_mut("conversion").and_then(Value::as_object_mut)
        && let Some(Value::Object(mut webhook)) = conv.remove("webhook")
    {
        if let Some(c) = webhook.remove("clientConfig") {
            conv.insert("webhookClientConfig".to_owned(), c);
        }
        if let Some(r) = webhook.remove("conversionReviewVersions") {
            conv.insert("conversionReviewVersions".to_owned(), r);
        }
    }
}

/// v1beta1 webhooks have other defaults than v1, which requires some of them to be set.
fn webhooks_to_v1(o: &mut Map<String, Value>) {
    for w in o
        .get_mut("webhooks")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        for (field, default) in [
            ("sideEffects", json!("Unknown")),
            ("admissionReviewVersions", json!(["v1beta1"])),
            ("failurePolicy", json!("Ignore")),
            ("matchPolicy", json!("Exact")),
            ("timeoutSeconds", json!(30)),
        ] {
            w.entry(field).or_insert(default);
        }
    }
}

/// Applies `f` to the default backend and every path's backend of an Ingress.
fn each_backend(spec: &mut Map<String, Value>, f: &dyn Fn(&mut Map<String, Value>)) {
    for key in ["backend", "defaultBackend"] {
        if let Some(b) = spec.get_mut(key).and_then(Value::as_object_mut) {
            f(b);
        }
    }
    for rule in spec
        .get_mut("rules")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        for path in rule
            .pointer_mut("/http/paths")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            path.entry("pathType")
                .or_insert_with(|| json!("ImplementationSpecific"));
            if let Some(b) = path.get_mut("backend").and_then(Value::as_object_mut) {
                f(b);
            }
        }
    }
}

/// v1beta1 Ingress to v1: `backend` becomes `defaultBackend`, `serviceName`/`servicePort`
/// become `service.name`/`service.port`.
fn ingress_to_v1(o: &mut Map<String, Value>) {
    let Some(spec) = spec_mut(o) else { return };
    rename(spec, "backend", "defaultBackend");
    each_backend(spec, &|b| {
        let name = b.remove("serviceName");
        let port = b.remove("servicePort");
        if name.is_none() && port.is_none() {
            return;
        }
        let port = match port {
            Some(Value::String(s)) => match s.parse::<i64>() {
                Ok(n) => json!({"number": n}),
                Err(_) => json!({"name": s}),
            },
            Some(n @ Value::Number(_)) => json!({"number": n}),
            _ => json!({}),
        };
        b.insert(
            "service".to_owned(),
            json!({"name": name.unwrap_or_default(), "port": port}),
        );
    });
}

/// v1 Ingress to v1beta1, the reverse of [`ingress_to_v1`].
fn ingress_to_v1beta1(o: &mut Map<String, Value>) {
    let Some(spec) = spec_mut(o) else { return };
    rename(spec, "defaultBackend", "backend");
    each_backend(spec, &|b| {
        let Some(Value::Object(mut svc)) = b.remove("service") else {
            return;
        };
        if let Some(n) = svc.remove("name") {
            b.insert("serviceName".to_owned(), n);
        }
        let port = svc.get("port").cloned().unwrap_or_default();
        if let Some(p) = port.get("number").or_else(|| port.get("name")) {
            b.insert("servicePort".to_owned(), p.clone());
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(plural: &str, legacy: &str, stored: &str, kind: &str) -> Conversion {
        Conversion {
            legacy: legacy.to_owned(),
            stored: stored.to_owned(),
            kind: kind.to_owned(),
            plural: plural.to_owned(),
        }
    }

    #[test]
    fn legacy_types_mirror_their_storage_types() {
        let role = TYPES
            .iter()
            .find(|t| t.api_version() == "rbac.authorization.k8s.io/v1beta1" && t.plural == "roles")
            .unwrap();
        assert_eq!(role.kind, "Role");
        assert!(role.namespaced);
        assert_eq!(storage(role), Some(("rbac.authorization.k8s.io", "v1")));
        let ing = TYPES.iter().find(|t| t.group == "extensions").unwrap();
        assert_eq!(storage(ing), Some(("networking.k8s.io", "v1")));
        assert_eq!(TYPES.len(), LEGACY.len());
    }

    #[test]
    fn v1beta1_crd_converts_to_v1_and_back() {
        let c = conv(
            "customresourcedefinitions",
            "apiextensions.k8s.io/v1beta1",
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
        );
        let schema = json!({"openAPIV3Schema": {"type": "object"}});
        let mut crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "CustomResourceDefinition",
            "spec": {"group": "x.io", "version": "v1", "validation": schema,
                     "subresources": {"status": {}},
                     "additionalPrinterColumns": [{"name": "Age", "type": "date", "JSONPath": ".metadata.creationTimestamp"}]},
        });
        c.to_stored(&mut crd);
        assert_eq!(crd["apiVersion"], "apiextensions.k8s.io/v1");
        let v = &crd["spec"]["versions"][0];
        assert_eq!(v["name"], "v1");
        assert_eq!(v["storage"], true);
        assert_eq!(v["schema"], schema);
        assert_eq!(v["subresources"]["status"], json!({}));
        assert_eq!(
            v["additionalPrinterColumns"][0]["jsonPath"],
            ".metadata.creationTimestamp"
        );
        assert!(crd["spec"].get("validation").is_none() && crd["spec"].get("version").is_none());
        c.to_legacy(&mut crd);
        assert_eq!(crd["apiVersion"], "apiextensions.k8s.io/v1beta1");
        assert_eq!(crd["spec"]["version"], "v1");
        assert_eq!(crd["spec"]["validation"], schema);
        assert_eq!(
            crd["spec"]["additionalPrinterColumns"][0]["JSONPath"],
            ".metadata.creationTimestamp"
        );
        assert!(crd["spec"]["versions"][0].get("schema").is_none());
    }

    #[test]
    fn hpa_cpu_target_converts_both_ways() {
        let c = conv(
            "horizontalpodautoscalers",
            "autoscaling/v1",
            "autoscaling/v2",
            "HorizontalPodAutoscaler",
        );
        let mut hpa = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "spec": {"minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 80},
            "status": {"currentReplicas": 2, "currentCPUUtilizationPercentage": 40}});
        c.to_stored(&mut hpa);
        assert_eq!(hpa["apiVersion"], "autoscaling/v2");
        assert_eq!(
            hpa["spec"]["metrics"][0]["resource"],
            json!({"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}})
        );
        assert!(hpa["spec"].get("targetCPUUtilizationPercentage").is_none());
        hpa["spec"]["behavior"] = json!({"scaleDown": {}});
        c.to_legacy(&mut hpa);
        assert_eq!(
            hpa["spec"],
            json!({"minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 80})
        );
        assert_eq!(
            hpa["status"],
            json!({"currentReplicas": 2, "currentCPUUtilizationPercentage": 40})
        );
    }

    #[test]
    fn ingress_backends_convert_both_ways() {
        let c = conv(
            "ingresses",
            "extensions/v1beta1",
            "networking.k8s.io/v1",
            "Ingress",
        );
        let mut ing = json!({"apiVersion": "extensions/v1beta1", "kind": "Ingress", "spec": {
            "backend": {"serviceName": "web", "servicePort": 80},
            "rules": [{"http": {"paths": [{"path": "/", "backend": {"serviceName": "api", "servicePort": "http"}}]}}]}});
        c.to_stored(&mut ing);
        assert_eq!(
            ing["spec"]["defaultBackend"],
            json!({"service": {"name": "web", "port": {"number": 80}}})
        );
        let path = &ing["spec"]["rules"][0]["http"]["paths"][0];
        assert_eq!(path["backend"]["service"]["port"]["name"], "http");
        assert_eq!(path["pathType"], "ImplementationSpecific");
        c.to_legacy(&mut ing);
        assert_eq!(
            ing["spec"]["backend"],
            json!({"serviceName": "web", "servicePort": 80})
        );
        assert_eq!(
            ing["spec"]["rules"][0]["http"]["paths"][0]["backend"]["servicePort"],
            "http"
        );
    }

    #[test]
    fn lists_and_watch_lines_are_rewritten() {
        let c = conv(
            "roles",
            "rbac.authorization.k8s.io/v1beta1",
            "rbac.authorization.k8s.io/v1",
            "Role",
        );
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role"});
        let list = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleList", "items": [role]});
        let out: Value =
            serde_json::from_slice(&c.data_to_legacy(&Bytes::from(list.to_string()))).unwrap();
        assert_eq!(out["apiVersion"], "rbac.authorization.k8s.io/v1beta1");
        assert_eq!(
            out["items"][0]["apiVersion"],
            "rbac.authorization.k8s.io/v1beta1"
        );
        let ev = json!({"type": "ADDED", "object": role});
        let out = c.data_to_legacy(&Bytes::from(format!("{ev}\n")));
        let text = std::str::from_utf8(&out).unwrap();
        assert!(text.ends_with('\n') && text.contains("rbac.authorization.k8s.io/v1beta1"));
        // Other documents (errors, protobuf) pass unchanged.
        let status = Bytes::from(json!({"kind": "Status", "apiVersion": "v1"}).to_string());
        assert_eq!(c.data_to_legacy(&status), status);
        let binary = Bytes::from_static(b"k8s\0\x01");
        assert_eq!(c.data_to_legacy(&binary), binary);
    }
}
