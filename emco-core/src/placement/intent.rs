//! The app placement intent as EMCO's REST API and emcoctl files carry it.
//!
//! ```json
//! {"metadata": {"name": "fw-placement"},
//!  "spec": {"app": "firewall",
//!           "intent": {"allOf": [{"clusterProvider": "edge", "clusterLabel": "LabelA",
//!                                 "anyOf": [{"clusterProvider": "edge", "cluster": "c9"}]}],
//!                      "anyOf": [{"clusterProvider": "cloud", "clusterLabel": "east"}]}}}
//! ```
//!
//! Accepted spellings: the current camelCase names, the hyphenated names of EMCO's first releases
//! (`provider-name`, `cluster-name`, `cluster-label-name`), and `allOf`/`anyOf` placed directly
//! under `spec` as EMCO's OpenAPI file shows them (merged into `spec.intent`). Unknown fields are
//! ignored. Serialization writes the camelCase form under `spec.intent` and omits empty fields,
//! as EMCO's JSON does.

use serde::{Deserialize, Serialize};

use crate::Object;
use crate::error::{Error, Result};
use crate::metadata::Metadata;
use crate::model::check_reference;
use crate::validate::{Validate, check_name};

/// An app placement intent: where one app of a composite app goes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(
    metadata,
    check = |i: &Self| i.spec.validate().map_err(|e| e.within("spec")),
    schema = crate::schemas::APP_INTENT,
    schema_message = schema_message
)]
pub struct AppPlacementIntent {
    /// Name and descriptions of the intent (empty ones left out when written, as EMCO does).
    #[serde(default, serialize_with = "crate::metadata::serialize_omitempty")]
    pub metadata: Metadata,
    /// The app and its placement rules.
    #[serde(default)]
    pub spec: AppPlacementSpec,
}

/// `spec` of an [`AppPlacementIntent`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "SpecWire")]
pub struct AppPlacementSpec {
    /// The app this intent places (`omitempty` in EMCO's struct).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub app: String,
    /// The placement rules.
    pub intent: PlacementIntent,
}

/// What `spec` may look like on the wire: the rules under `intent`, or (OpenAPI form) directly
/// under `spec`; both are merged.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecWire {
    #[serde(default, alias = "appName", alias = "app-name")]
    app: String,
    #[serde(default)]
    intent: PlacementIntent,
    #[serde(default)]
    all_of: Vec<AllOf>,
    #[serde(default)]
    any_of: Vec<AnyOf>,
}

impl From<SpecWire> for AppPlacementSpec {
    fn from(w: SpecWire) -> Self {
        let mut intent = w.intent;
        intent.all_of.extend(w.all_of);
        intent.any_of.extend(w.any_of);
        Self { app: w.app, intent }
    }
}

/// `spec.intent`: clusters the app must go to (`allOf`) and groups of which one cluster is
/// chosen (`anyOf`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementIntent {
    /// Mandatory clusters (by name or label), each optionally carrying a nested anyOf group.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub all_of: Vec<AllOf>,
    /// One group: exactly one of these clusters is chosen.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub any_of: Vec<AnyOf>,
}

impl PlacementIntent {
    /// True when the intent names no cluster, label or group at all.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.all_of.is_empty() && self.any_of.is_empty()
    }
}

/// An `allOf` element: a mandatory cluster (`cluster`) or set of clusters (`clusterLabel`), and
/// optionally a nested `anyOf` group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllOf {
    /// The cluster provider the cluster or label belongs to.
    #[serde(
        default,
        alias = "provider-name",
        alias = "providerName",
        skip_serializing_if = "String::is_empty"
    )]
    pub cluster_provider: String,
    /// A cluster by name; exclusive with `cluster_label`.
    #[serde(
        default,
        alias = "cluster-name",
        alias = "clusterName",
        skip_serializing_if = "String::is_empty"
    )]
    pub cluster: String,
    /// Every cluster of the provider with this label; exclusive with `cluster`.
    #[serde(
        default,
        alias = "cluster-label-name",
        alias = "clusterLabelName",
        skip_serializing_if = "String::is_empty"
    )]
    pub cluster_label: String,
    /// A nested group: exactly one of these clusters is chosen, in addition to the mandatory ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub any_of: Vec<AnyOf>,
}

/// An `anyOf` element: a candidate cluster (`cluster`) or candidate set (`clusterLabel`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnyOf {
    /// The cluster provider the cluster or label belongs to.
    #[serde(
        default,
        alias = "provider-name",
        alias = "providerName",
        skip_serializing_if = "String::is_empty"
    )]
    pub cluster_provider: String,
    /// A cluster by name; exclusive with `cluster_label`.
    #[serde(
        default,
        alias = "cluster-name",
        alias = "clusterName",
        skip_serializing_if = "String::is_empty"
    )]
    pub cluster: String,
    /// Every cluster of the provider with this label; exclusive with `cluster`.
    #[serde(
        default,
        alias = "cluster-label-name",
        alias = "clusterLabelName",
        skip_serializing_if = "String::is_empty"
    )]
    pub cluster_label: String,
}

/// What an allOf or anyOf entry selects within its provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// One cluster by name.
    Cluster(&'a str),
    /// Every cluster carrying the label.
    Label(&'a str),
}

/// Checks provider and the cluster/label exclusivity of one entry and returns its target, or
/// `None` when the entry names neither (only legal for an allOf element that merely holds a
/// nested anyOf). Paths are relative to the entry.
fn entry_target<'a>(
    provider: &str,
    cluster: &'a str,
    label: &'a str,
) -> Result<Option<Target<'a>>> {
    let target = match (cluster.is_empty(), label.is_empty()) {
        (false, false) => {
            return Err(Error::invalid(format!(
                "names both cluster {cluster:?} and clusterLabel {label:?}: set exactly one"
            )));
        }
        (false, true) => Some(Target::Cluster(cluster)),
        (true, false) => Some(Target::Label(label)),
        (true, true) => None,
    };
    if let Some(t) = target {
        check_reference("clusterProvider", provider)?;
        match t {
            Target::Cluster(c) => check_name("cluster", c)?,
            Target::Label(l) => check_name("clusterLabel", l)?,
        }
    }
    Ok(target)
}

impl AllOf {
    /// The mandatory target of this element, or `None` when it only holds a nested anyOf group
    /// (`{"anyOf": [...]}`, which EMCO accepts).
    ///
    /// # Errors
    /// InvalidArgument (path relative to the element) when both `cluster` and `clusterLabel` are
    /// set, when neither is set and there is no nested anyOf, or when a name is invalid.
    pub fn target(&self) -> Result<Option<Target<'_>>> {
        let target = entry_target(&self.cluster_provider, &self.cluster, &self.cluster_label)?;
        if target.is_none() && self.any_of.is_empty() {
            return Err(Error::invalid(
                "names neither cluster nor clusterLabel: set exactly one",
            ));
        }
        Ok(target)
    }
}

impl AnyOf {
    /// The candidate target of this element.
    ///
    /// # Errors
    /// InvalidArgument (path relative to the element) unless exactly one of `cluster` and
    /// `clusterLabel` is set with valid names.
    pub fn target(&self) -> Result<Target<'_>> {
        entry_target(&self.cluster_provider, &self.cluster, &self.cluster_label)?.ok_or_else(|| {
            Error::invalid("names neither cluster nor clusterLabel: set exactly one")
        })
    }
}

impl Validate for AnyOf {
    fn validate(&self) -> Result<()> {
        self.target().map(|_| ())
    }
}

impl Validate for AllOf {
    fn validate(&self) -> Result<()> {
        self.target()?;
        self.any_of.validate().map_err(|e| e.within("anyOf"))
    }
}

impl Validate for PlacementIntent {
    fn validate(&self) -> Result<()> {
        if self.is_empty() {
            return Err(Error::invalid("names no cluster: give allOf or anyOf"));
        }
        self.all_of.validate().map_err(|e| e.within("allOf"))?;
        self.any_of.validate().map_err(|e| e.within("anyOf"))
    }
}

impl Validate for AppPlacementSpec {
    fn validate(&self) -> Result<()> {
        check_reference("app", &self.app)?;
        self.intent.validate().map_err(|e| e.within("intent"))
    }
}

/// app_intent_handler.go `handleJsonSchemaValidationError`: the first of these errors in the
/// handler's words, else the schema's text.
fn schema_message(text: String) -> String {
    const WORDS: [(&str, &str); 5] = [
        (
            "clusterProvider is required",
            "Missing clusterProvider in an intent",
        ),
        ("cluster is required", "Missing cluster or clusterLabel"),
        (
            "Must not validate the schema (not)",
            "Only one of cluster name or cluster label allowed",
        ),
        ("app is required", "Missing app for the intent"),
        ("name is required", "Missing name for the intent"),
    ];
    WORDS
        .iter()
        .find(|(found, _)| text.contains(found))
        .map_or(text, |(_, said)| (*said).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> AppPlacementIntent {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn camel_case_round_trip_omits_empty_fields() {
        // The metadata's empty fields are left out too (app_intent.go's MetaData is omitempty).
        let v = json!({"metadata": {"name": "i1"},
            "spec": {"app": "a", "intent": {
                "allOf": [{"clusterProvider": "p", "clusterLabel": "l",
                           "anyOf": [{"clusterProvider": "p", "cluster": "c2"}]},
                          {"clusterProvider": "p", "cluster": "c1"}],
                "anyOf": [{"clusterProvider": "q", "clusterLabel": "east"}]}}});
        let i = parse(v.clone());
        assert_eq!(i.spec.intent.all_of[0].cluster_label, "l");
        assert_eq!(i.spec.intent.all_of[0].any_of[0].cluster, "c2");
        assert!(i.validate().is_ok());
        assert_eq!(serde_json::to_value(&i).unwrap(), v);
    }

    #[test]
    fn old_spellings_openapi_form_and_unknown_fields() {
        let i = parse(json!({"metadata": {"name": "i1"}, "extra": true,
            "spec": {"app": "a", "what": 1,
                     "intent": {"allOf": [{"provider-name": "p", "cluster-name": "c1", "x": 0}]},
                     "anyOf": [{"provider-name": "p", "cluster-label-name": "l"}]}}));
        assert_eq!(i.spec.intent.all_of[0].cluster_provider, "p");
        assert_eq!(i.spec.intent.all_of[0].cluster, "c1");
        assert_eq!(i.spec.intent.any_of[0].cluster_label, "l");
        let out = serde_json::to_value(&i).unwrap();
        assert_eq!(
            out["spec"]["intent"]["anyOf"][0],
            json!({"clusterProvider": "p", "clusterLabel": "l"})
        );
        assert!(out["spec"].get("anyOf").is_none());
    }

    #[test]
    fn validation_paths() {
        let base = |intent: serde_json::Value| {
            parse(json!({"metadata": {"name": "i"}, "spec": {"app": "a", "intent": intent}}))
        };
        let cases = [
            (
                json!({"allOf": [{"clusterProvider": "p", "cluster": "c", "clusterLabel": "l"}]}),
                "spec.intent.allOf[0]",
            ),
            (
                json!({"allOf": [{"clusterProvider": "p"}]}),
                "spec.intent.allOf[0]",
            ),
            (
                json!({"allOf": [{"cluster": "c"}]}),
                "spec.intent.allOf[0].clusterProvider",
            ),
            (
                json!({"allOf": [{"clusterProvider": "p", "cluster": "-c"}]}),
                "spec.intent.allOf[0].cluster",
            ),
            (
                json!({"allOf": [{"anyOf": [{"clusterProvider": "p"}]}]}),
                "spec.intent.allOf[0].anyOf[0]",
            ),
            (
                json!({"anyOf": [{"clusterProvider": "p", "cluster": "c"}, {"clusterProvider": "p", "cluster": "c", "clusterLabel": "l"}]}),
                "spec.intent.anyOf[1]",
            ),
            (
                json!({"anyOf": [{"clusterProvider": "p", "clusterLabel": "bad label"}]}),
                "spec.intent.anyOf[0].clusterLabel",
            ),
            (json!({}), "spec.intent"),
        ];
        for (intent, path) in cases {
            let e = base(intent.clone()).validate().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{intent}");
            assert_eq!(e.field(), Some(path), "{intent}: {e}");
        }
        let holder =
            base(json!({"allOf": [{"anyOf": [{"clusterProvider": "p", "cluster": "c"}]}]}));
        assert!(holder.validate().is_ok());
        let no_app = parse(
            json!({"metadata": {"name": "i"}, "spec": {"intent": {"anyOf": [{"clusterProvider": "p", "cluster": "c"}]}}}),
        );
        assert_eq!(no_app.validate().unwrap_err().field(), Some("spec.app"));
        let bad_meta = parse(
            json!({"metadata": {"name": ""}, "spec": {"app": "a", "intent": {"anyOf": [{"clusterProvider": "p", "cluster": "c"}]}}}),
        );
        assert_eq!(
            bad_meta.validate().unwrap_err().field(),
            Some("metadata.name")
        );
    }
}
