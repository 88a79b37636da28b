//! Discovery documents: `/version`, `/api`, `/apis`, group versions, and the aggregated
//! discovery (`apidiscovery.k8s.io/v2`) that kubectl asks for first.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::resources::{ResourceType, VERBS};

/// Content type of aggregated discovery answers.
pub(crate) const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether the `Accept` header asks for aggregated discovery (v2).
pub(crate) fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').any(|a| {
        let a = a.replace(' ', "");
        a.contains("g=apidiscovery.k8s.io")
            && a.contains("v=v2")
            && !a.contains("v=v2beta1")
            && a.contains("as=APIGroupDiscoveryList")
    })
}

/// The `/version` document.
pub(crate) fn version() -> Value {
    json!({
        "major": "1", "minor": "32", "gitVersion": "v1.32.0-kubesim",
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23.0", "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `/api`.
pub(crate) fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// The groups (other than core) and their versions, in serving order.
fn groups(types: &[Arc<ResourceType>]) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for t in types.iter().filter(|t| !t.group.is_empty()) {
        match out.iter_mut().find(|(g, _)| *g == t.group) {
            Some((_, versions)) => {
                if !versions.contains(&t.version) {
                    versions.push(t.version.clone());
                }
            }
            None => out.push((t.group.clone(), vec![t.version.clone()])),
        }
    }
    out
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({"name": name, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
}

/// `/apis`.
pub(crate) fn group_list(types: &[Arc<ResourceType>]) -> Value {
    let gs: Vec<Value> = groups(types).iter().map(|(g, v)| group_doc(g, v)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": gs})
}

/// `/apis/{group}`, if the group is served.
pub(crate) fn group(types: &[Arc<ResourceType>], name: &str) -> Option<Value> {
    let (g, v) = groups(types).into_iter().find(|(g, _)| g == name)?;
    let mut doc = group_doc(&g, &v);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

/// `/api/v1` or `/apis/{group}/{version}`, if served.
pub(crate) fn resource_list(
    types: &[Arc<ResourceType>],
    group: &str,
    version: &str,
) -> Option<Value> {
    let mut resources = Vec::new();
    for t in types
        .iter()
        .filter(|t| t.group == group && t.version == version)
    {
        resources.push(json!({
            "name": t.plural, "singularName": t.singular, "namespaced": t.namespaced,
            "kind": t.kind, "verbs": VERBS, "shortNames": t.short_names, "categories": t.categories,
        }));
        for sub in subresources(t) {
            let mut r = json!({
                "name": format!("{}/{}", t.plural, sub.name), "singularName": "", "namespaced": t.namespaced,
                "kind": t.kind, "verbs": sub.verbs,
            });
            if let Some((group, version, kind)) = sub.kind {
                r["group"] = json!(group);
                r["version"] = json!(version);
                r["kind"] = json!(kind);
            }
            resources.push(r);
        }
    }
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

/// A subresource a type serves.
struct Sub {
    name: &'static str,
    verbs: &'static [&'static str],
    /// (group, version, kind) of its objects when they are not the type's own.
    kind: Option<(&'static str, &'static str, &'static str)>,
}

const READ_WRITE: &[&str] = &["get", "patch", "update"];

fn subresources(t: &ResourceType) -> Vec<Sub> {
    let mut subs = Vec::new();
    if t.status {
        subs.push(Sub {
            name: "status",
            verbs: READ_WRITE,
            kind: None,
        });
    }
    if t.scale.is_some() {
        subs.push(Sub {
            name: "scale",
            verbs: READ_WRITE,
            kind: Some(("autoscaling", "v1", "Scale")),
        });
    }
    if t.plural == "certificatesigningrequests" {
        subs.push(Sub {
            name: "approval",
            verbs: READ_WRITE,
            kind: None,
        });
    }
    if t.group.is_empty() && t.plural == "serviceaccounts" {
        subs.push(Sub {
            name: "token",
            verbs: &["create"],
            kind: Some(("authentication.k8s.io", "v1", "TokenRequest")),
        });
    }
    subs
}

/// Aggregated discovery of the core group (`core == true`, for `/api`) or of all other groups.
pub(crate) fn aggregated(types: &[Arc<ResourceType>], core: bool) -> Value {
    let names: Vec<(String, Vec<String>)> = if core {
        vec![(String::new(), vec!["v1".to_owned()])]
    } else {
        groups(types)
    };
    let items: Vec<Value> = names
        .iter()
        .map(|(g, versions)| {
            let vs: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let rs: Vec<Value> = types
                        .iter()
                        .filter(|t| t.group == *g && t.version == *v)
                        .map(|t| {
                            let kind = json!({"group": t.group, "version": t.version, "kind": t.kind});
                            let subs: Vec<Value> = subresources(t)
                                .into_iter()
                                .map(|s| {
                                    let response = s.kind.map_or_else(
                                        || kind.clone(),
                                        |(group, version, kind)| json!({"group": group, "version": version, "kind": kind}),
                                    );
                                    json!({"subresource": s.name, "responseKind": response, "verbs": s.verbs})
                                })
                                .collect();
                            json!({
                                "resource": t.plural, "responseKind": kind,
                                "scope": if t.namespaced { "Namespaced" } else { "Cluster" },
                                "singularResource": t.singular, "verbs": VERBS,
                                "shortNames": t.short_names, "categories": t.categories,
                                "subresources": subs,
                            })
                        })
                        .collect();
                    json!({"version": v, "resources": rs, "freshness": "Current"})
                })
                .collect();
            let meta = if g.is_empty() { json!({"creationTimestamp": null}) } else { json!({"name": g, "creationTimestamp": null}) };
            json!({"metadata": meta, "versions": vs})
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}

/// `/openapi/v3`: the index of group-version documents.
pub(crate) fn openapi_v3_root(types: &[Arc<ResourceType>]) -> Value {
    let mut paths = serde_json::Map::new();
    for t in types {
        let p = gv_path(&t.group, &t.version);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}")}),
        );
    }
    json!({"paths": paths})
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`: the operations of the group
/// version, without schemas. Clients read it to learn which query parameters (`fieldValidation`,
/// `dryRun`, `force`) the server supports; schemas are not published, so no client validates
/// against them.
pub(crate) fn openapi_v3_gv(
    types: &[Arc<ResourceType>],
    group: &str,
    version: &str,
) -> Option<Value> {
    let mut paths = serde_json::Map::new();
    let query = |names: &[&str]| -> Vec<Value> {
        names.iter().map(|n| json!({"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": true}})).collect()
    };
    for t in types
        .iter()
        .filter(|t| t.group == group && t.version == version)
    {
        let gvk = json!({"group": t.group, "version": t.version, "kind": t.kind});
        let base = if t.namespaced {
            format!(
                "/{}/namespaces/{{namespace}}/{}",
                gv_path(group, version),
                t.plural
            )
        } else {
            format!("/{}/{}", gv_path(group, version), t.plural)
        };
        let ok = json!({"200": {"description": "OK"}});
        let mut patch_types = vec![
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ];
        if !t.custom {
            patch_types.push("application/strategic-merge-patch+json");
        }
        let content: serde_json::Map<String, Value> = patch_types
            .iter()
            .map(|c| ((*c).to_owned(), json!({"schema": {"type": "object"}})))
            .collect();
        paths.insert(base.clone(), json!({
            "get": {"x-kubernetes-action": "list", "x-kubernetes-group-version-kind": gvk, "responses": ok},
            "post": {"x-kubernetes-action": "post", "x-kubernetes-group-version-kind": gvk,
                     "parameters": query(&["dryRun", "fieldManager", "fieldValidation"]), "responses": ok},
        }));
        paths.insert(format!("{base}/{{name}}"), json!({
            "get": {"x-kubernetes-action": "get", "x-kubernetes-group-version-kind": gvk, "responses": ok},
            "put": {"x-kubernetes-action": "put", "x-kubernetes-group-version-kind": gvk,
                    "parameters": query(&["dryRun", "fieldManager", "fieldValidation"]), "responses": ok},
            "patch": {"x-kubernetes-action": "patch", "x-kubernetes-group-version-kind": gvk,
                      "parameters": query(&["dryRun", "fieldManager", "fieldValidation", "force"]),
                      "requestBody": {"content": content}, "responses": ok},
            "delete": {"x-kubernetes-action": "delete", "x-kubernetes-group-version-kind": gvk, "responses": ok},
        }));
    }
    if paths.is_empty() {
        return None;
    }
    Some(
        json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.0"}, "paths": paths,
                "components": {"schemas": {}}}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::BUILTIN_TYPES;

    #[test]
    fn documents() {
        let types = &*BUILTIN_TYPES;
        let apps = resource_list(types, "apps", "v1").unwrap();
        assert!(
            apps["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["name"] == "deployments/status")
        );
        let scale = apps["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "deployments/scale")
            .unwrap();
        assert_eq!(
            (&scale["group"], &scale["version"], &scale["kind"]),
            (&json!("autoscaling"), &json!("v1"), &json!("Scale"))
        );
        assert_eq!(scale["verbs"], json!(["get", "patch", "update"]));
        let core = resource_list(types, "", "v1").unwrap();
        let core_names: Vec<&Value> = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| &r["name"])
            .collect();
        assert!(core_names.contains(&&json!("replicationcontrollers/scale")));
        assert!(!core_names.contains(&&json!("pods/scale")));
        assert!(resource_list(types, "apps", "v9").is_none());
        assert!(group(types, "batch").is_some());
        let agg = aggregated(types, false);
        assert_eq!(agg["items"][0]["metadata"]["name"], "apps");
        let deployments = agg["items"][0]["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "deployments")
            .unwrap();
        assert!(
            deployments["subresources"]
                .as_array()
                .unwrap()
                .contains(&json!({
            "subresource": "scale", "verbs": ["get", "patch", "update"],
            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}}))
        );
        let core = aggregated(types, true);
        assert!(
            core["items"][0]["versions"][0]["resources"]
                .as_array()
                .unwrap()
                .len()
                > 10
        );
        assert!(wants_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
        ));
        assert!(!wants_aggregated("application/json, */*"));
        let apps_doc = openapi_v3_gv(types, "apps", "v1").unwrap();
        let patch =
            &apps_doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"]["kind"],
            "Deployment"
        );
        assert!(openapi_v3_root(types)["paths"]["apis/batch/v1"].is_object());
    }
}
