//! The `scale` subresource: an autoscaling/v1 `Scale` view of a workload's replica count
//! (Deployments, ReplicaSets, StatefulSets, ReplicationControllers, and custom resources whose
//! CRD declares `subresources.scale`), as `kubectl scale` and HorizontalPodAutoscalers use it.
//!
//! A write to the Scale is a write of the parent's replica field: it goes through the parent's
//! resourceVersion check, generation, field ownership and rollout simulation, so the workload's
//! status follows the new count after the ready delay.
//!
//! The module is a child of `api` so that it can reuse the verbs' building blocks.

use http::Method;
use serde_json::{Value, json};

use super::{
    ApiResult, Req, Target, check_namespace, crd_of, key, lists, meta_str, ok, write_existing,
};
use crate::apply::{Part, apply, record_update};
use crate::cluster::Cluster;
use crate::patch::{json_patch, merge_patch, strategic_merge};
use crate::resources::ScalePaths;
use crate::selector::LabelSelector;
use crate::status::{ApiError, FieldError};

/// `.spec.replicas` as a JSON pointer (`/spec/replicas`).
fn pointer(path: &str) -> String {
    path.trim_start_matches('.')
        .split('.')
        .fold(String::new(), |mut p, s| {
            p.push('/');
            p.push_str(s);
            p
        })
}

fn int_at(obj: &Value, path: &str) -> i64 {
    obj.pointer(&pointer(path))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// The Scale of `obj`. Built-in types keep a selector object, custom resources a string.
pub(super) fn to_scale(paths: &ScalePaths, obj: &Value) -> Value {
    let meta = &obj["metadata"];
    let mut m = json!({"name": meta["name"], "uid": meta["uid"],
        "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"]});
    if let Some(ns) = meta.get("namespace") {
        m["namespace"] = ns.clone();
    }
    let mut spec = json!({});
    // `replicas` is `omitempty` in ScaleSpec, but not in ScaleStatus.
    let replicas = int_at(obj, &paths.spec_replicas);
    if replicas != 0 {
        spec["replicas"] = json!(replicas);
    }
    let mut status = json!({"replicas": int_at(obj, &paths.status_replicas)});
    let selector = paths
        .label_selector
        .as_deref()
        .and_then(|p| obj.pointer(&pointer(p)))
        .and_then(|s| match s {
            Value::String(s) => Some(s.clone()),
            Value::Object(_) => LabelSelector::from_object(s).map(|s| s.to_string()),
            _ => None,
        })
        .filter(|s| !s.is_empty());
    if let Some(s) = selector {
        status["selector"] = json!(s);
    }
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": m, "spec": spec, "status": status})
}

/// GET, PUT and PATCH of `NAME/scale`.
pub(super) fn serve(
    cluster: &std::sync::Arc<Cluster>,
    t: &Target<'_>,
    name: &str,
    r: &Req,
) -> ApiResult {
    let Some(paths) = t.rt.scale.as_ref() else {
        return Err(ApiError::path_not_found());
    };
    let mut store = cluster.store();
    check_namespace(&store, t, false)?;
    let old = store
        .get(&key(t, name))
        .ok_or_else(|| ApiError::not_found(&t.rt, name))?;
    let current = to_scale(paths, &old);
    let ct = r.media_type();
    let (scale, applying) = match r.method {
        Method::GET => return ok(&current),
        Method::PUT => (r.json_body()?, false),
        Method::PATCH => {
            let body = r.json_body()?;
            let mut new = current.clone();
            match ct.as_str() {
                "application/apply-patch+yaml" => (body, true),
                "application/json-patch+json" => {
                    json_patch(&mut new, &body).map_err(|m| ApiError {
                        code: 422,
                        reason: "Invalid",
                        message: m,
                        details: None,
                        retry_after: None,
                    })?;
                    (unset_rv(new, &body), false)
                }
                "application/merge-patch+json" => {
                    merge_patch(&mut new, &body);
                    (unset_rv(new, &body), false)
                }
                "application/strategic-merge-patch+json" => {
                    strategic_merge(&mut new, &body);
                    (unset_rv(new, &body), false)
                }
                other => return Err(ApiError::unsupported_media_type(other)),
            }
        }
        ref m => return Err(ApiError::method_not_allowed(m.as_str())),
    };
    check_scale(&scale, name)?;
    let replicas = scale
        .pointer("/spec/replicas")
        .map_or(Some(0), Value::as_i64);
    let Some(replicas) = replicas.filter(|n| *n >= 0) else {
        return Err(ApiError::invalid_fields(
            "autoscaling",
            "Scale",
            name,
            &[FieldError::new(
                "spec.replicas",
                "FieldValueInvalid",
                format!(
                    "{}: must be greater than or equal to 0",
                    scale.pointer("/spec/replicas").unwrap_or(&Value::Null)
                ),
            )],
        ));
    };
    let manager = r.manager();
    let av = t.rt.api_version();
    let crd = crd_of(&store, &t.rt);
    let lists = lists(&t.rt, crd.as_deref());
    let spec_ptr = pointer(&paths.spec_replicas);
    let mut new = (*old).clone();
    match new.pointer_mut(&spec_ptr) {
        Some(v) => *v = json!(replicas),
        None => set_at(&mut new, &spec_ptr, json!(replicas)),
    }
    // The Scale's resourceVersion is the parent's, with the same conflict rule.
    match meta_str(&scale, "resourceVersion").filter(|rv| !rv.is_empty()) {
        Some(rv) => new["metadata"]["resourceVersion"] = json!(rv),
        None => {
            if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("resourceVersion");
            }
        }
    }
    if applying {
        // Server-side apply of a Scale is an apply of the parent's replica field: the same
        // ownership and conflicts as applying the workload itself.
        let mut partial = json!({"apiVersion": av, "kind": t.rt.kind, "metadata": {"name": name}});
        set_at(&mut partial, &spec_ptr, json!(replicas));
        let force = r.q("force").is_some_and(|f| f == "true");
        new = apply(&old, &partial, &manager, &av, force, Part::Main, lists)
            .map_err(|c| ApiError::conflict(&t.rt, name, c.message, c.causes))?;
        new["metadata"]["resourceVersion"] =
            json!(meta_str(&scale, "resourceVersion").unwrap_or_default());
    }
    let stored = write_existing(
        cluster,
        &mut store,
        t,
        &old,
        new,
        |o, n| {
            if !applying {
                record_update(Some(o), n, &manager, &av, Part::Main, lists);
            }
        },
        r.dry_run(),
    )?;
    ok(&to_scale(paths, &stored))
}

/// A patch applies to the current Scale: its resourceVersion only counts if the patch set it.
fn unset_rv(mut scale: Value, patch: &Value) -> Value {
    if patch.pointer("/metadata/resourceVersion").is_none()
        && let Some(m) = scale.get_mut("metadata").and_then(Value::as_object_mut)
    {
        m.remove("resourceVersion");
    }
    scale
}

/// The body must be a Scale of the object on the URL.
fn check_scale(scale: &Value, name: &str) -> Result<(), ApiError> {
    if !scale.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    if let Some(k) = scale.get("kind").and_then(Value::as_str)
        && k != "Scale"
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({k}) does not match the expected kind (Scale)"
        )));
    }
    match meta_str(scale, "name") {
        Some(n) if !n.is_empty() && n != name => Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        ))),
        _ => Ok(()),
    }
}

/// Sets the value at a JSON pointer, making the objects on the way.
fn set_at(obj: &mut Value, ptr: &str, v: Value) {
    let mut cur = obj;
    let segs: Vec<&str> = ptr.split('/').skip(1).collect();
    for (i, s) in segs.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let Some(o) = cur.as_object_mut() else { return };
        if i + 1 == segs.len() {
            o.insert((*s).to_owned(), v);
            return;
        }
        cur = o.entry((*s).to_owned()).or_insert_with(|| json!({}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_of_builtin_and_custom_objects() {
        let builtin = ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: Some(".spec.selector".into()),
        };
        let d = json!({"metadata": {"name": "web", "namespace": "default", "resourceVersion": "7"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"replicas": 2}});
        let s = to_scale(&builtin, &d);
        assert_eq!(s["spec"], json!({"replicas": 3}));
        assert_eq!(s["status"], json!({"replicas": 2, "selector": "app=web"}));
        assert_eq!(s["metadata"]["resourceVersion"], "7");
        assert_eq!(s["metadata"]["namespace"], "default");

        let custom = ScalePaths {
            spec_replicas: ".spec.size".into(),
            status_replicas: ".status.count".into(),
            label_selector: Some(".status.sel".into()),
        };
        let c = json!({"metadata": {"name": "c"}, "spec": {}, "status": {"sel": "a=b"}});
        let s = to_scale(&custom, &c);
        assert_eq!(
            s["spec"],
            json!({}),
            "0 replicas are omitted as in ScaleSpec"
        );
        assert_eq!(s["status"], json!({"replicas": 0, "selector": "a=b"}));
    }

    #[test]
    fn set_at_makes_the_way() {
        let mut v = json!({"metadata": {}});
        set_at(&mut v, &pointer(".spec.deep.size"), json!(4));
        assert_eq!(v["spec"]["deep"]["size"], 4);
        assert_eq!(pointer(".spec.replicas"), "/spec/replicas");
    }
}
