//! Drift policies (ours): what emco-rs does when an object it deployed is changed behind its
//! back (`.../deployment-intent-groups/{dig}/drift-policies`, at most one per group; it takes
//! effect with the group's next instantiate or update, which carries it to the clusters'
//! followers). Without one, drift is reported.
//!
//! - `report`: the status lists each drifted field with the manager that changed it and when.
//! - `correct`: emco-rs applies the object again, at most once per `correctInterval`; when the
//!   drift comes back `maxCorrections` times in a row, another controller is fighting it and it
//!   gives up, saying so.
//! - `ignore`: the object's drift is neither reported nor corrected.
//!
//! `ignoreFields` are field paths (and what is below them) whose changes are no drift at all,
//! such as `spec.replicas` where an autoscaler owns it; `correct` leaves them to whoever set them.
//! `overrides` change the action, or add fields to ignore, for an app, a kind, or both.
//!
//! ```
//! use emco_core::drift::{DriftAction, DriftPolicy};
//!
//! let policy: DriftPolicy = serde_json::from_value(serde_json::json!({
//!     "metadata": {"name": "drift"},
//!     "spec": {"action": "correct", "ignoreFields": ["metadata.annotations"],
//!              "overrides": [{"kind": "Deployment", "ignoreFields": ["spec.replicas"]},
//!                            {"app": "db", "action": "report"}]}})).unwrap();
//! let web = policy.spec.rule_for("web", "Deployment");
//! assert_eq!(web.action, DriftAction::Correct);
//! assert!(web.ignores("spec.replicas") && web.ignores("metadata.annotations.x"));
//! assert!(!web.ignores("spec.template"));
//! assert_eq!(policy.spec.rule_for("db", "Service").action, DriftAction::Report);
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::Object;
use crate::rollout::duration;
use crate::{Error, Metadata, Result, Validate};

/// A drift policy: `{metadata, spec}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(metadata, check = |p: &Self| p.spec.validate())]
pub struct DriftPolicy {
    /// Its name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// What it says.
    #[serde(default)]
    pub spec: DriftSpec,
}

/// What emco-rs does about drift.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DriftAction {
    /// List it in the status.
    #[default]
    Report,
    /// Apply the object again.
    Correct,
    /// Neither.
    Ignore,
}

/// The `spec` of a [`DriftPolicy`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftSpec {
    /// What to do (default `report`).
    #[serde(default)]
    pub action: DriftAction,
    /// Field paths whose changes are no drift (with what is below them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore_fields: Vec<String>,
    /// `correct`: the least time between two corrections of one object (a Go duration,
    /// default `30s`).
    #[serde(default = "default_interval")]
    pub correct_interval: String,
    /// `correct`: how many corrections in a row the drift may undo before emco-rs gives up on
    /// the object (default 3).
    #[serde(default = "default_max")]
    pub max_corrections: u32,
    /// Per app, kind or both: another action, more fields to ignore; applied in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<DriftOverride>,
}

impl Default for DriftSpec {
    fn default() -> Self {
        Self {
            action: DriftAction::Report,
            ignore_fields: Vec::new(),
            correct_interval: default_interval(),
            max_corrections: default_max(),
            overrides: Vec::new(),
        }
    }
}

fn default_interval() -> String {
    "30s".to_owned()
}

const fn default_max() -> u32 {
    3
}

/// An override of a [`DriftSpec`] for the objects of an app, a kind, or both.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftOverride {
    /// The app (any when empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub app: String,
    /// The kind (any when empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The action there, when it differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<DriftAction>,
    /// More fields to ignore there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore_fields: Vec<String>,
}

/// What a policy says of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriftRule {
    /// What to do.
    pub action: DriftAction,
    /// The fields whose changes are no drift.
    pub ignore_fields: Vec<String>,
}

impl DriftRule {
    /// Whether a change of `path` is no drift: it is, or is below, an ignored field.
    #[must_use]
    pub fn ignores(&self, path: &str) -> bool {
        self.ignore_fields.iter().any(|f| {
            path.strip_prefix(f.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
        })
    }
}

impl DriftSpec {
    /// The rule for the objects of kind `kind` of app `app`.
    #[must_use]
    pub fn rule_for(&self, app: &str, kind: &str) -> DriftRule {
        let mut rule = DriftRule {
            action: self.action,
            ignore_fields: self.ignore_fields.clone(),
        };
        for o in &self.overrides {
            if (o.app.is_empty() || o.app == app) && (o.kind.is_empty() || o.kind == kind) {
                if let Some(a) = o.action {
                    rule.action = a;
                }
                rule.ignore_fields.extend(o.ignore_fields.iter().cloned());
            }
        }
        rule
    }

    /// `correctInterval` as a duration.
    ///
    /// # Errors
    /// InvalidArgument naming the field when it is not a positive Go duration.
    pub fn correct_interval(&self) -> Result<Duration> {
        duration("spec.correctInterval", &self.correct_interval, false)
    }
}

/// Checks a field path: dot-separated names, with `[key=value]` items.
fn check_path(field: &str, path: &str) -> Result<()> {
    let bad = path.is_empty()
        || path.starts_with(['.', '['])
        || path.ends_with('.')
        || path.contains("..")
        || path.contains(char::is_whitespace);
    if bad {
        return Err(Error::invalid(format!(
            "{path:?} is not a field path such as spec.replicas"
        ))
        .with_field(field));
    }
    Ok(())
}

impl Validate for DriftSpec {
    fn validate(&self) -> Result<()> {
        self.correct_interval()?;
        if self.max_corrections == 0 {
            return Err(Error::invalid("must be at least 1").with_field("spec.maxCorrections"));
        }
        for (i, f) in self.ignore_fields.iter().enumerate() {
            check_path(&format!("spec.ignoreFields[{i}]"), f)?;
        }
        for (i, o) in self.overrides.iter().enumerate() {
            if o.action.is_none() && o.ignore_fields.is_empty() {
                return Err(Error::invalid(
                    "an override changes the action or adds fields to ignore",
                )
                .with_field(format!("spec.overrides[{i}]")));
            }
            for (j, f) in o.ignore_fields.iter().enumerate() {
                check_path(&format!("spec.overrides[{i}].ignoreFields[{j}]"), f)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v: serde_json::Value) -> Result<DriftSpec> {
        let s: DriftSpec = serde_json::from_value(v).map_err(|e| Error::invalid(e.to_string()))?;
        s.validate().map(|()| s)
    }

    #[test]
    fn defaults_report_and_bad_fields_are_named() {
        let s = spec(serde_json::json!({})).unwrap();
        assert_eq!(s.rule_for("a", "b").action, DriftAction::Report);
        assert_eq!(s.correct_interval().unwrap(), Duration::from_secs(30));
        assert_eq!(s.max_corrections, 3);
        for (bad, field) in [
            (
                serde_json::json!({"correctInterval": "soon"}),
                "spec.correctInterval",
            ),
            (
                serde_json::json!({"correctInterval": "0s"}),
                "spec.correctInterval",
            ),
            (
                serde_json::json!({"maxCorrections": 0}),
                "spec.maxCorrections",
            ),
            (
                serde_json::json!({"ignoreFields": ["spec..x"]}),
                "spec.ignoreFields[0]",
            ),
            (
                serde_json::json!({"overrides": [{"app": "a"}]}),
                "spec.overrides[0]",
            ),
            (
                serde_json::json!({"overrides": [{"ignoreFields": [" x"]}]}),
                "spec.overrides[0].ignoreFields[0]",
            ),
        ] {
            let e = spec(bad.clone()).unwrap_err();
            assert_eq!(e.field(), Some(field), "{bad}: {e}");
        }
        assert!(spec(serde_json::json!({"action": "fix"})).is_err());
    }

    #[test]
    fn overrides_apply_in_order() {
        let s = spec(serde_json::json!({"action": "correct",
            "overrides": [{"app": "a", "action": "ignore"},
                          {"app": "a", "kind": "Service", "action": "report", "ignoreFields": ["spec.ports"]}]}))
        .unwrap();
        assert_eq!(s.rule_for("a", "Deployment").action, DriftAction::Ignore);
        let svc = s.rule_for("a", "Service");
        assert_eq!(svc.action, DriftAction::Report);
        assert!(svc.ignores("spec.ports[name=http].port") && !svc.ignores("spec.portsx"));
        assert_eq!(s.rule_for("b", "Service").action, DriftAction::Correct);
    }
}
