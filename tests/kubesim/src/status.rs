//! API errors, answered as `Status` objects with the reasons and codes of the real API server.

use serde_json::{Value, json};

use crate::resources::ResourceType;

/// An error answer of the simulated API server.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub(crate) code: u16,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
    // Boxed: serde_json::Value grows when another crate enables `preserve_order`, and errors
    // travel in every Result of the request path.
    pub(crate) details: Option<Box<Value>>,
    pub(crate) retry_after: Option<u32>,
}

/// One invalid field, as the real server's `field.Error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError {
    /// The path (`spec.template.spec.containers[0].name`).
    pub(crate) field: String,
    /// The cause type (`FieldValueRequired`, `FieldValueInvalid`, ...).
    pub(crate) reason: &'static str,
    /// What follows the type's text: `"Foo": a lowercase ...`, or empty.
    pub(crate) detail: String,
}

impl FieldError {
    pub(crate) fn new(
        field: impl Into<String>,
        reason: &'static str,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            field: field.into(),
            reason,
            detail: detail.into(),
        }
    }

    /// The cause message: `Required value`, `Invalid value: 0: must be ...`.
    fn body(&self) -> String {
        if self.detail.is_empty() {
            reason_text(self.reason).to_owned()
        } else {
            format!("{}: {}", reason_text(self.reason), self.detail)
        }
    }
}

/// `details` of a Status: the group is left out for the core group, as Go's `omitempty` does.
pub(crate) fn details(rt: &ResourceType, name: &str) -> Value {
    let mut d = json!({"name": name, "group": rt.group, "kind": rt.plural});
    if rt.group.is_empty()
        && let Some(o) = d.as_object_mut()
    {
        o.remove("group");
    }
    d
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    pub(crate) fn not_found(rt: &ResourceType, name: &str) -> Self {
        Self {
            details: Some(Box::new(details(rt, name))),
            ..Self::new(
                404,
                "NotFound",
                format!("{} \"{name}\" not found", rt.qualified()),
            )
        }
    }

    /// The namespace of a namespaced request does not exist.
    pub(crate) fn namespace_not_found(ns: &str) -> Self {
        Self {
            details: Some(Box::new(json!({"name": ns, "kind": "namespaces"}))),
            ..Self::new(404, "NotFound", format!("namespaces \"{ns}\" not found"))
        }
    }

    /// A path the server does not serve.
    pub(crate) fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    pub(crate) fn already_exists(rt: &ResourceType, name: &str) -> Self {
        Self {
            details: Some(Box::new(details(rt, name))),
            ..Self::new(
                409,
                "AlreadyExists",
                format!("{} \"{name}\" already exists", rt.qualified()),
            )
        }
    }

    /// A stale `resourceVersion` on a write.
    pub(crate) fn stale(rt: &ResourceType, name: &str) -> Self {
        Self {
            details: Some(Box::new(details(rt, name))),
            ..Self::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                     please apply your changes to the latest version and try again",
                    rt.qualified()
                ),
            )
        }
    }

    /// A conflict with a free-form message and causes (server-side apply).
    pub(crate) fn conflict(
        rt: &ResourceType,
        name: &str,
        message: String,
        causes: Vec<Value>,
    ) -> Self {
        let mut d = details(rt, name);
        d["causes"] = Value::Array(causes);
        Self {
            details: Some(Box::new(d)),
            ..Self::new(409, "Conflict", message)
        }
    }

    /// A validation failure (422) of one field.
    pub(crate) fn invalid(
        rt: &ResourceType,
        name: &str,
        field: &str,
        reason: &'static str,
        detail: &str,
    ) -> Self {
        Self::invalid_fields(
            &rt.group,
            &rt.kind,
            name,
            &[FieldError::new(field, reason, detail)],
        )
    }

    /// A validation failure (422) of one or more fields, worded as the real server's
    /// `errors.NewInvalid`: one error inline, several in brackets; one cause each.
    pub(crate) fn invalid_fields(group: &str, kind: &str, name: &str, errs: &[FieldError]) -> Self {
        let qualified = if group.is_empty() {
            kind.to_owned()
        } else {
            format!("{kind}.{group}")
        };
        let causes: Vec<Value> = errs
            .iter()
            .map(|e| json!({"reason": e.reason, "message": e.body(), "field": e.field}))
            .collect();
        let all: Vec<String> = errs
            .iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect();
        let list = if all.len() == 1 {
            all.concat()
        } else {
            format!("[{}]", all.join(", "))
        };
        Self {
            details: Some(Box::new(json!({
                "name": name, "group": group, "kind": kind, "causes": causes,
            }))),
            ..Self::new(
                422,
                "Invalid",
                format!("{qualified} \"{name}\" is invalid: {list}"),
            )
        }
    }

    /// A patch whose result the kind's Go type cannot hold: the real server's 422 on the
    /// `patch` field, quoting `shown` (the patched object or the patch).
    pub(crate) fn invalid_patch(shown: &str, message: &str) -> Self {
        let quoted = Value::String(shown.to_owned()).to_string();
        let cause = format!("Invalid value: {quoted}: {message}");
        Self {
            details: Some(Box::new(json!({
                "causes": [{"reason": "FieldValueInvalid", "message": cause, "field": "patch"}],
            }))),
            ..Self::new(422, "Invalid", format!(" \"\" is invalid: patch: {cause}"))
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub(crate) fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub(crate) fn method_not_allowed(method: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        )
    }

    pub(crate) fn unsupported_media_type(ct: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json; got {ct}"
            ),
        )
    }

    /// A watch asked for a version the event log no longer holds.
    pub(crate) fn gone(requested: u64, oldest: u64) -> Self {
        Self::new(
            410,
            "Expired",
            format!("too old resource version: {requested} ({oldest})"),
        )
    }

    /// A continue token whose snapshot the event log no longer reaches.
    pub(crate) fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The real server's answer to a server-side apply it cannot type (an unknown field of a
    /// built-in kind, whatever `fieldValidation` says): a 500 without a reason.
    pub(crate) fn typed_patch(message: impl Into<String>) -> Self {
        Self::new(500, "", message)
    }

    /// An injected overload answer (429 with `Retry-After`).
    pub(crate) fn too_many_requests() -> Self {
        Self {
            retry_after: Some(1),
            details: Some(Box::new(json!({"retryAfterSeconds": 1}))),
            ..Self::new(
                429,
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later",
            )
        }
    }

    pub(crate) fn unavailable() -> Self {
        Self::new(
            503,
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        )
    }

    /// The `Status` object of this error.
    pub(crate) fn to_status(&self) -> Value {
        let mut v = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        // The real server leaves out an empty reason (a 500 of server-side apply has none).
        if self.reason.is_empty()
            && let Some(o) = v.as_object_mut()
        {
            o.remove("reason");
        }
        if let Some(d) = &self.details {
            v["details"] = (**d).clone();
        }
        v
    }
}

fn reason_text(reason: &str) -> &'static str {
    match reason {
        "FieldValueRequired" => "Required value",
        "FieldValueNotSupported" => "Unsupported value",
        "FieldValueForbidden" => "Forbidden",
        "FieldValueDuplicate" => "Duplicate value",
        "FieldValueTooLong" => "Too long",
        _ => "Invalid value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::BUILTIN_TYPES;

    #[test]
    fn statuses_match_the_real_server() {
        let rt = BUILTIN_TYPES
            .iter()
            .find(|t| t.plural == "deployments")
            .unwrap();
        let s = ApiError::not_found(rt, "web").to_status();
        assert_eq!(s["message"], "deployments.apps \"web\" not found");
        assert_eq!(s["code"], 404);
        assert_eq!(s["details"]["kind"], "deployments");
        let s = ApiError::invalid(
            rt,
            "",
            "metadata.name",
            "FieldValueRequired",
            "name or generateName is required",
        )
        .to_status();
        assert_eq!(
            s["message"],
            "Deployment.apps \"\" is invalid: metadata.name: Required value: name or generateName is required"
        );
        assert_eq!(ApiError::too_many_requests().retry_after, Some(1));
    }
}
