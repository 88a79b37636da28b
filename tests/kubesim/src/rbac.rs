//! Authorization as kube-apiserver's RBAC authorizer decides it: a request on a resource is
//! allowed when a rule of a role bound to its user (or one of its groups, or its service
//! account) covers the verb, the API group, the resource (with its subresource) and the name.
//!
//! - `system:masters` may do anything, as the real server's superuser group; so may subjects
//!   bound to the built-in ClusterRole `cluster-admin`. The other bootstrap roles (`admin`,
//!   `edit`, `view`, the `system:` ones) are not there: bind roles the cluster holds.
//! - RoleBindings grant in their namespace (to a Role there or to a ClusterRole's rules),
//!   ClusterRoleBindings everywhere. Aggregated ClusterRoles count with the rules they hold.
//! - Discovery, OpenAPI and the health endpoints need no role, as `system:discovery` and
//!   `system:public-info-viewer` grant them to everyone on a real cluster.

use serde_json::{Value, json};

use crate::resources::ResourceType;
use crate::status::ApiError;
use crate::store::Store;

/// Who makes a request.
pub(crate) struct Subject<'a> {
    pub(crate) user: &'a str,
    pub(crate) groups: &'a [String],
}

/// What a request does to which resource.
pub(crate) struct Attributes<'a> {
    pub(crate) verb: &'static str,
    pub(crate) rt: &'a ResourceType,
    pub(crate) sub: Option<&'a str>,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) name: Option<&'a str>,
}

const RBAC: &str = "rbac.authorization.k8s.io";

/// Allows the request or answers the real server's 403.
///
/// # Errors
/// `Forbidden` when no bound rule covers the request.
pub(crate) fn authorize(
    store: &Store,
    who: &Subject<'_>,
    a: &Attributes<'_>,
) -> Result<(), ApiError> {
    if who.groups.iter().any(|g| g == "system:masters") || allowed(store, who, a) {
        return Ok(());
    }
    Err(forbidden(who.user, a))
}

fn allowed(store: &Store, who: &Subject<'_>, a: &Attributes<'_>) -> bool {
    let cluster_bindings = store.list("rbac.authorization.k8s.io/clusterrolebindings", None);
    let namespace_bindings = a
        .namespace
        .into_iter()
        .flat_map(|ns| store.list("rbac.authorization.k8s.io/rolebindings", Some(ns)));
    cluster_bindings
        .chain(namespace_bindings)
        .filter(|(_, b)| binds(b, who))
        .any(|(key, b)| {
            let role = &b["roleRef"];
            let name = role["name"].as_str().unwrap_or_default();
            match role["kind"].as_str() {
                Some("ClusterRole") if name == "cluster-admin" => true,
                Some("ClusterRole") => store
                    .get(&(
                        format!("{RBAC}/clusterroles"),
                        String::new(),
                        name.to_owned(),
                    ))
                    .is_some_and(|r| covers(&r, a)),
                // A RoleBinding's Role is in the binding's namespace.
                Some("Role") => store
                    .get(&(format!("{RBAC}/roles"), key.1.clone(), name.to_owned()))
                    .is_some_and(|r| covers(&r, a)),
                _ => false,
            }
        })
}

/// Whether one of the binding's subjects is the requester.
fn binds(binding: &Value, who: &Subject<'_>) -> bool {
    let subjects = binding["subjects"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    subjects.iter().any(|s| {
        let name = s["name"].as_str().unwrap_or_default();
        match s["kind"].as_str() {
            Some("User") => name == who.user,
            Some("Group") => who.groups.iter().any(|g| g == name),
            Some("ServiceAccount") => {
                let ns = s["namespace"].as_str().unwrap_or_default();
                who.user == format!("system:serviceaccount:{ns}:{name}")
            }
            _ => false,
        }
    })
}

/// Whether a rule of `role` covers the request.
fn covers(role: &Value, a: &Attributes<'_>) -> bool {
    let resource = match a.sub {
        Some(sub) => format!("{}/{sub}", a.rt.plural),
        None => a.rt.plural.clone(),
    };
    let rules = role["rules"].as_array().map_or(&[][..], Vec::as_slice);
    rules.iter().any(|rule| {
        let list = |field: &str| -> Vec<&str> {
            rule[field]
                .as_array()
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default()
        };
        let has = |field: &str, want: &str| list(field).iter().any(|v| *v == "*" || *v == want);
        let names = list("resourceNames");
        let resources = list("resources");
        let resource_ok = resources.iter().any(|r| {
            *r == "*"
                || *r == resource
                // `*/scale` covers every kind's scale subresource.
                || a.sub.is_some_and(|sub| r.strip_prefix("*/") == Some(sub))
        });
        has("verbs", a.verb)
            && has("apiGroups", &a.rt.group)
            && resource_ok
            && (names.is_empty() || a.name.is_some_and(|n| names.contains(&n)))
    })
}

/// The real server's refusal: `deployments.apps "web" is forbidden: User "bob" cannot patch
/// resource "deployments" in API group "apps" in the namespace "team"`.
fn forbidden(user: &str, a: &Attributes<'_>) -> ApiError {
    let what = match a.name {
        Some(n) => format!("{} \"{n}\"", a.rt.qualified()),
        None => a.rt.qualified(),
    };
    let resource = match a.sub {
        Some(sub) => format!("{}/{sub}", a.rt.plural),
        None => a.rt.plural.clone(),
    };
    let scope = match a.namespace {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".to_owned(),
    };
    let mut details = json!({"kind": a.rt.plural});
    if let Some(n) = a.name {
        details["name"] = json!(n);
    }
    if !a.rt.group.is_empty() {
        details["group"] = json!(a.rt.group);
    }
    ApiError {
        code: 403,
        reason: "Forbidden",
        message: format!(
            "{what} is forbidden: User \"{user}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
            a.verb, a.rt.group
        ),
        details: Some(Box::new(details)),
        retry_after: None,
    }
}
