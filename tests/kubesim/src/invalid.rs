//! The object validation of the real API server that clients see as 422 `Invalid`: names,
//! workload selectors against their pod templates, containers, Service ports, and the fields an
//! update may not change. Messages and cause paths are worded as the real server's
//! (`k8s.io/apimachinery/pkg/util/validation`, `pkg/apis/*/validation`), values printed as Go's
//! `%#v` prints them.
//!
//! It runs on the defaulted object of every create, update, patch and apply of the main
//! resource; status writes are not validated (nor here nor, for these fields, on the real
//! server).

use emco_core::validate::{dns1123_label_errors, dns1123_subdomain_errors, is_dns1123_label};
use serde_json::Value;

use crate::resources::ResourceType;
use crate::selector::LabelSelector;
use crate::status::FieldError;

const REQUIRED: &str = "FieldValueRequired";
const INVALID: &str = "FieldValueInvalid";
const DUPLICATE: &str = "FieldValueDuplicate";

/// The validation errors of `obj` (with `old` for an update), in the real server's order:
/// metadata, spec, then immutable fields.
pub(crate) fn check(rt: &ResourceType, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if old.is_none() {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        errs.extend(name_errors(rt, name));
    }
    if rt.custom {
        return errs;
    }
    let spec = obj.get("spec");
    let template_spec = spec.and_then(|s| s.pointer("/template/spec"));
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("apps", "deployments") => workload(&mut errs, spec, Some("deployment")),
        // The real server's ReplicaSet message also says "deployment".
        ("apps", "replicasets") => workload(&mut errs, spec, Some("deployment")),
        ("apps", "statefulsets") => workload(&mut errs, spec, Some("statefulset")),
        ("apps", "daemonsets") => workload(&mut errs, spec, None),
        ("", "replicationcontrollers") => {
            containers(&mut errs, template_spec, "spec.template.spec")
        }
        ("", "pods") => containers(&mut errs, spec, "spec"),
        ("batch", "jobs") => containers(&mut errs, template_spec, "spec.template.spec"),
        ("batch", "cronjobs") => containers(
            &mut errs,
            spec.and_then(|s| s.pointer("/jobTemplate/spec/template/spec")),
            "spec.jobTemplate.spec.template.spec",
        ),
        ("", "services") => service(&mut errs, spec),
        _ => {}
    }
    if let Some(old) = old {
        immutable(&mut errs, rt, obj, old);
    }
    errs
}

/// `metadata.name` by the rule of the type: DNS-1123 label (namespaces), DNS-1035 label
/// (services), path segment (RBAC), DNS-1123 subdomain (the rest, custom resources too).
pub(crate) fn name_errors(rt: &ResourceType, name: &str) -> Vec<FieldError> {
    let msgs = match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "namespaces") => dns1123_label_errors(name),
        ("", "services") => dns1035_label(name),
        ("rbac.authorization.k8s.io", _) => path_segment(name),
        _ => dns1123_subdomain_errors(name),
    };
    msgs.into_iter()
        .map(|m| FieldError::new("metadata.name", INVALID, format!("{}: {m}", quote(name))))
        .collect()
}

fn quote(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

fn dns1035_label(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > 63 {
        out.push("must be no more than 63 characters".to_owned());
    }
    if !is_dns1123_label(s) || !s.starts_with(|c: char| c.is_ascii_lowercase()) {
        out.push(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start \
             with an alphabetic character, and end with an alphanumeric character (e.g. \
             'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
                .to_owned(),
        );
    }
    out
}

fn path_segment(s: &str) -> Vec<String> {
    if s == "." || s == ".." {
        return vec![format!("may not be '{s}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|c| s.contains(**c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

/// A `map[string]string` as Go's `%#v` prints it (keys sorted).
fn go_string_map(v: Option<&Value>) -> String {
    match v.and_then(Value::as_object) {
        None => "map[string]string(nil)".to_owned(),
        Some(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let parts: Vec<String> = entries
                .iter()
                .map(|(k, v)| format!("{}:{}", quote(k), quote(v.as_str().unwrap_or_default())))
                .collect();
            format!("map[string]string{{{}}}", parts.join(", "))
        }
    }
}

/// A `metav1.LabelSelector` as Go's `%#v` prints it.
fn go_label_selector(sel: &Value) -> String {
    let exprs = match sel.get("matchExpressions").and_then(Value::as_array) {
        None => "[]v1.LabelSelectorRequirement(nil)".to_owned(),
        Some(list) => {
            let items: Vec<String> = list
                .iter()
                .map(|e| {
                    let values = match e.get("values").and_then(Value::as_array) {
                        None => "[]string(nil)".to_owned(),
                        Some(vs) => {
                            let vs: Vec<String> = vs
                                .iter()
                                .map(|v| quote(v.as_str().unwrap_or_default()))
                                .collect();
                            format!("[]string{{{}}}", vs.join(", "))
                        }
                    };
                    let s = |f: &str| quote(e.get(f).and_then(Value::as_str).unwrap_or_default());
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{values}}}",
                        s("key"),
                        s("operator")
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
    };
    format!(
        "v1.LabelSelector{{MatchLabels:{}, MatchExpressions:{exprs}}}",
        go_string_map(sel.get("matchLabels"))
    )
}

/// A workload's selector against its template, then the template's containers. `empty_for`
/// names the kind in the "empty selector" message; `None` (DaemonSets) checks the match first
/// and does not require a selector, as the real server.
fn workload(errs: &mut Vec<FieldError>, spec: Option<&Value>, empty_for: Option<&str>) {
    let sel = spec
        .and_then(|s| s.get("selector"))
        .filter(|s| !s.is_null());
    let template = spec.and_then(|s| s.get("template"));
    let labels = template.and_then(|t| t.pointer("/metadata/labels"));
    let empty = sel.is_some_and(|s| {
        let n = |f: &str| {
            s.get(f)
                .and_then(|v| {
                    v.as_object()
                        .map(|o| o.len())
                        .or(v.as_array().map(Vec::len))
                })
                .unwrap_or(0)
        };
        n("matchLabels") + n("matchExpressions") == 0
    });
    let parsed = sel.map(LabelSelector::from_object);
    // A missing selector matches nothing (`labels.Nothing()`), an empty one everything.
    let mismatch = match &parsed {
        None => true,
        Some(Some(s)) => {
            !s.is_empty() && !s.matches(&serde_json::json!({"metadata": {"labels": labels}}))
        }
        Some(None) => false,
    };
    let mismatch_err = || {
        FieldError::new(
            "spec.template.metadata.labels",
            INVALID,
            format!(
                "{}: `selector` does not match template `labels`",
                go_string_map(labels)
            ),
        )
    };
    let invalid_selector = |s: &Value| {
        FieldError::new(
            "spec.selector",
            INVALID,
            format!("{}: invalid label selector", go_label_selector(s)),
        )
    };
    match empty_for {
        Some(kind) => {
            match sel {
                None => errs.push(FieldError::new("spec.selector", REQUIRED, "")),
                Some(s) if empty => errs.push(FieldError::new(
                    "spec.selector",
                    INVALID,
                    format!(
                        "{}: empty selector is invalid for {kind}",
                        go_label_selector(s)
                    ),
                )),
                _ => {}
            }
            match (sel, &parsed) {
                (Some(s), Some(None)) => errs.push(invalid_selector(s)),
                _ if mismatch => errs.push(mismatch_err()),
                _ => {}
            }
        }
        None => {
            if mismatch {
                errs.push(mismatch_err());
            }
            match (sel, &parsed) {
                (Some(s), Some(None)) => errs.push(invalid_selector(s)),
                (Some(s), _) if empty => errs.push(FieldError::new(
                    "spec.selector",
                    INVALID,
                    format!(
                        "{}: empty selector is invalid for daemonset",
                        go_label_selector(s)
                    ),
                )),
                _ => {}
            }
        }
    }
    containers(
        errs,
        template.and_then(|t| t.get("spec")),
        "spec.template.spec",
    );
}

/// A pod spec's containers: at least one, each with a valid unique name and an image.
fn containers(errs: &mut Vec<FieldError>, pod_spec: Option<&Value>, path: &str) {
    let list = pod_spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if list.is_empty() {
        errs.push(FieldError::new(format!("{path}.containers"), REQUIRED, ""));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, c) in list.iter().enumerate() {
        let at = format!("{path}.containers[{i}]");
        let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
        if name.is_empty() {
            errs.push(FieldError::new(format!("{at}.name"), REQUIRED, ""));
        } else {
            for m in dns1123_label_errors(name) {
                errs.push(FieldError::new(
                    format!("{at}.name"),
                    INVALID,
                    format!("{}: {m}", quote(name)),
                ));
            }
            if !seen.insert(name) {
                errs.push(FieldError::new(
                    format!("{at}.name"),
                    DUPLICATE,
                    quote(name),
                ));
            }
        }
        if c.get("image")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            errs.push(FieldError::new(format!("{at}.image"), REQUIRED, ""));
        }
    }
}

/// A Service's ports: required unless headless or ExternalName; names required when there are
/// several, and unique; port numbers in range.
fn service(errs: &mut Vec<FieldError>, spec: Option<&Value>) {
    let ports = spec
        .and_then(|s| s.get("ports"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let s = |f: &str| spec.and_then(|s| s.get(f)).and_then(Value::as_str);
    if ports.is_empty() && s("clusterIP") != Some("None") && s("type") != Some("ExternalName") {
        errs.push(FieldError::new("spec.ports", REQUIRED, ""));
    }
    let mut names = std::collections::BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        let at = format!("spec.ports[{i}]");
        let name = p.get("name").and_then(Value::as_str).unwrap_or_default();
        if ports.len() > 1 && name.is_empty() {
            errs.push(FieldError::new(format!("{at}.name"), REQUIRED, ""));
        } else if !name.is_empty() {
            for m in dns1123_label_errors(name) {
                errs.push(FieldError::new(
                    format!("{at}.name"),
                    INVALID,
                    format!("{}: {m}", quote(name)),
                ));
            }
            if !names.insert(name) {
                errs.push(FieldError::new(
                    format!("{at}.name"),
                    DUPLICATE,
                    quote(name),
                ));
            }
        }
        let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
        if !(1..=65535).contains(&port) {
            errs.push(FieldError::new(
                format!("{at}.port"),
                INVALID,
                format!("{port}: must be between 1 and 65535, inclusive"),
            ));
        }
    }
}

/// Fields an update may not change: workload selectors, a Service's cluster IP.
fn immutable(errs: &mut Vec<FieldError>, rt: &ResourceType, new: &Value, old: &Value) {
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets") => {
            let (n, o) = (new.pointer("/spec/selector"), old.pointer("/spec/selector"));
            let normal = |v: Option<&Value>| v.and_then(LabelSelector::from_object);
            if o.is_some() && normal(n) != normal(o) {
                let shown = n.map_or_else(|| "null".to_owned(), go_label_selector);
                errs.push(FieldError::new(
                    "spec.selector",
                    INVALID,
                    format!("{shown}: field is immutable"),
                ));
            }
        }
        ("", "services") => {
            let ip = |v: &Value| {
                v.pointer("/spec/clusterIP")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
            };
            if let (Some(o), Some(n)) = (ip(old), ip(new))
                && o != n
            {
                errs.push(FieldError::new(
                    "spec.clusterIPs[0]",
                    INVALID,
                    format!("[]string{{{}}}: may not change once set", quote(&n)),
                ));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::BUILTIN_TYPES;
    use crate::status::ApiError;
    use serde_json::json;

    fn rt(plural: &str) -> &'static ResourceType {
        BUILTIN_TYPES.iter().find(|t| t.plural == plural).unwrap()
    }

    fn message(plural: &str, obj: &Value, old: Option<&Value>) -> String {
        let t = rt(plural);
        let errs = check(t, obj, old);
        ApiError::invalid_fields(&t.group, &t.kind, "x", &errs).message
    }

    fn deployment(selector: Value, labels: Value) -> Value {
        json!({"metadata": {"name": "x"}, "spec": {"selector": selector, "template": {
            "metadata": {"labels": labels}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}})
    }

    #[test]
    fn workload_selectors_match_the_real_messages() {
        let ok = deployment(
            json!({"matchLabels": {"app": "x"}}),
            json!({"app": "x", "v": "1"}),
        );
        assert!(check(rt("deployments"), &ok, None).is_empty());
        let bad = deployment(json!({"matchLabels": {"app": "y"}}), json!({"app": "x"}));
        assert_eq!(
            message("deployments", &bad, None),
            "Deployment.apps \"x\" is invalid: spec.template.metadata.labels: Invalid value: \
             map[string]string{\"app\":\"x\"}: `selector` does not match template `labels`"
        );
        let mut none = deployment(json!(null), json!({"app": "x"}));
        none["spec"].as_object_mut().unwrap().remove("selector");
        assert_eq!(
            message("deployments", &none, None),
            "Deployment.apps \"x\" is invalid: [spec.selector: Required value, \
             spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"x\"}: \
             `selector` does not match template `labels`]"
        );
        // A DaemonSet does not require one, but nothing matches without it.
        let errs = check(rt("daemonsets"), &none, None);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "spec.template.metadata.labels");
        let empty = deployment(json!({}), json!({"app": "x"}));
        assert_eq!(
            message("statefulsets", &empty, None),
            "StatefulSet.apps \"x\" is invalid: spec.selector: Invalid value: \
             v1.LabelSelector{MatchLabels:map[string]string(nil), \
             MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for statefulset"
        );
        let expr = deployment(
            json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["x", "y"]}]}),
            json!({"app": "x"}),
        );
        assert!(check(rt("replicasets"), &expr, None).is_empty());
    }

    #[test]
    fn selector_is_immutable() {
        let old = deployment(json!({"matchLabels": {"app": "x"}}), json!({"app": "x"}));
        let new = deployment(json!({"matchLabels": {"app": "y"}}), json!({"app": "y"}));
        assert_eq!(
            message("deployments", &new, Some(&old)),
            "Deployment.apps \"x\" is invalid: spec.selector: Invalid value: \
             v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"y\"}, \
             MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
        );
        assert!(check(rt("deployments"), &old, Some(&old)).is_empty());
    }

    #[test]
    fn containers_need_unique_names_and_images() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a", "image": "i"}, {"name": "a"}, {"image": "i"}, {"name": "B", "image": "i"}]}});
        let errs = check(rt("pods"), &pod, None);
        let shown: Vec<String> = errs
            .iter()
            .map(|e| format!("{} {} {}", e.field, e.reason, e.detail))
            .collect();
        assert_eq!(
            shown[0],
            "spec.containers[1].name FieldValueDuplicate \"a\""
        );
        assert_eq!(shown[1], "spec.containers[1].image FieldValueRequired ");
        assert_eq!(shown[2], "spec.containers[2].name FieldValueRequired ");
        assert!(shown[3].starts_with(
            "spec.containers[3].name FieldValueInvalid \"B\": a lowercase RFC 1123 label"
        ));
        assert_eq!(errs.len(), 4);
        let job = json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": {}}}});
        assert_eq!(
            check(rt("jobs"), &job, None)[0].field,
            "spec.template.spec.containers"
        );
    }

    #[test]
    fn names_follow_the_rule_of_their_type() {
        let long = "a".repeat(254);
        let msgs: Vec<String> = name_errors(rt("configmaps"), &long)
            .iter()
            .map(|e| e.detail.clone())
            .collect();
        assert_eq!(
            msgs,
            vec![format!("\"{long}\": must be no more than 253 characters")]
        );
        assert!(name_errors(rt("configmaps"), "a.b-c").is_empty());
        assert_eq!(name_errors(rt("configmaps"), "Web_1").len(), 1);
        assert_eq!(name_errors(rt("namespaces"), "a.b").len(), 1);
        assert_eq!(name_errors(rt("services"), "1abc").len(), 1);
        assert!(name_errors(rt("namespaces"), "1abc").is_empty());
        assert!(name_errors(rt("clusterroles"), "system:Admin").is_empty());
        assert_eq!(
            name_errors(rt("clusterroles"), "a/b")[0].detail,
            "\"a/b\": may not contain '/'"
        );
        assert_eq!(
            message(
                "services",
                &json!({"metadata": {"name": "Web"}, "spec": {"ports": [{"port": 80}]}}),
                None
            ),
            "Service \"x\" is invalid: metadata.name: Invalid value: \"Web\": a DNS-1035 label must \
             consist of lower case alphanumeric characters or '-', start with an alphabetic \
             character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', \
             regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
        );
    }

    #[test]
    fn service_ports_and_cluster_ip() {
        let svc = |ports: Value| json!({"metadata": {"name": "s"}, "spec": {"ports": ports}});
        assert_eq!(
            message("services", &svc(json!([{"targetPort": 80}])), None),
            "Service \"x\" is invalid: spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive"
        );
        let two = svc(json!([{"port": 80}, {"port": 81, "name": "b"}]));
        assert_eq!(
            check(rt("services"), &two, None)[0].field,
            "spec.ports[0].name"
        );
        assert_eq!(
            check(rt("services"), &svc(json!([])), None)[0].field,
            "spec.ports"
        );
        let headless = json!({"metadata": {"name": "h"}, "spec": {"clusterIP": "None"}});
        assert!(check(rt("services"), &headless, None).is_empty());
        let old = json!({"metadata": {"name": "s"}, "spec": {"clusterIP": "10.96.0.1", "ports": [{"port": 80}]}});
        let mut new = old.clone();
        new["spec"]["clusterIP"] = json!("10.96.0.9");
        assert_eq!(
            message("services", &new, Some(&old)),
            "Service \"x\" is invalid: spec.clusterIPs[0]: Invalid value: []string{\"10.96.0.9\"}: may not change once set"
        );
    }
}
