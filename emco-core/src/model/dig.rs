//! Deployment intent groups, their intents and generic placement intents.
//!
//! The lifecycle state kept beside a DIG and the app placement intents are modelled elsewhere
//! (the lifecycle and placement modules).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Object;
use crate::error::{Error, Result};
use crate::metadata::Metadata;
use crate::model::check_reference;
use crate::validate::{NAME_MAX, Validate, check_max_len, check_required};

/// `CA/deployment-intent-groups/{dig}`:
/// `{metadata, spec:{compositeProfile, version, logicalCloud, overrideValues}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(metadata, check = Self::check, schema = crate::schemas::DEPLOYMENT_INTENT_GROUP)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentIntentGroup {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// What to deploy where.
    #[serde(default)]
    pub spec: DeploymentIntentGroupSpec,
}

/// The `spec` of a [`DeploymentIntentGroup`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentIntentGroupSpec {
    /// The composite profile whose app profiles customize the charts (older EMCO: `profile`).
    #[serde(default, alias = "profile")]
    pub composite_profile: String,
    /// The Helm release name the apps are rendered with.
    #[serde(default)]
    pub version: String,
    /// The logical cloud the apps are deployed into (older EMCO: `logical-cloud`).
    #[serde(default, alias = "logical-cloud")]
    pub logical_cloud: String,
    /// Per-app `--set`-style values; EMCO's OpenAPI spells it `override-values`.
    #[serde(default, alias = "override-values")]
    pub override_values: Vec<OverrideValues>,
}

/// `{app, values:{"dotted.key": "value"}}`: Helm `--set` values for one app.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OverrideValues {
    /// The app the values apply to.
    #[serde(default)]
    pub app: String,
    /// Dotted keys (`service.type`) to string values.
    #[serde(default)]
    pub values: BTreeMap<String, String>,
}

impl DeploymentIntentGroup {
    /// The Helm release name (`spec.version`).
    #[must_use]
    pub fn release_name(&self) -> &str {
        &self.spec.version
    }

    /// The override values of `app`, merged in list order when the app appears more than once.
    #[must_use]
    pub fn override_values_for(&self, app: &str) -> BTreeMap<&str, &str> {
        self.spec
            .override_values
            .iter()
            .filter(|o| o.app == app)
            .flat_map(|o| o.values.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .collect()
    }
}

impl Validate for OverrideValues {
    fn validate(&self) -> Result<()> {
        check_reference("app", &self.app)?;
        for key in self.values.keys() {
            if key.trim().is_empty() {
                return Err(Error::invalid("value keys must not be empty").with_field("values"));
            }
        }
        Ok(())
    }
}

impl DeploymentIntentGroup {
    fn check(&self) -> Result<()> {
        check_reference("spec.compositeProfile", &self.spec.composite_profile)?;
        check_required("spec.version", &self.spec.version)?;
        check_max_len("spec.version", &self.spec.version, NAME_MAX)?;
        check_reference("spec.logicalCloud", &self.spec.logical_cloud)?;
        self.spec
            .override_values
            .validate()
            .map_err(|e| e.within("spec.overrideValues"))
    }
}

/// The key under which DIG intents name the generic placement intent.
pub const GENERIC_PLACEMENT_INTENT_KEY: &str = "genericPlacementIntent";
/// The spelling of [`GENERIC_PLACEMENT_INTENT_KEY`] in EMCO's OpenAPI and older clients.
pub const GENERIC_PLACEMENT_INTENT_KEY_OLD: &str = "generic-placement-intent";

/// `DIG/intents/{groupIntent}`: `{metadata, spec:{intent:{controllerName: intentName}}}`, which
/// intents of which controllers apply to the DIG.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(metadata, check = Self::check, schema = crate::schemas::DEPLOYMENT_INTENT)]
#[serde(rename_all = "camelCase")]
pub struct DigIntent {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The intent map.
    #[serde(default)]
    pub spec: DigIntentSpec,
}

/// The `spec` of a [`DigIntent`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DigIntentSpec {
    /// Controller name (or `genericPlacementIntent`) to the name of that controller's intent.
    #[serde(default)]
    pub intent: BTreeMap<String, String>,
}

impl DigIntent {
    /// The name of the generic placement intent, under either spelling of its key.
    #[must_use]
    pub fn generic_placement_intent(&self) -> Option<&str> {
        let intent = &self.spec.intent;
        intent
            .get(GENERIC_PLACEMENT_INTENT_KEY)
            .or_else(|| intent.get(GENERIC_PLACEMENT_INTENT_KEY_OLD))
            .map(String::as_str)
    }

    /// The intent named for `controller`, if any.
    #[must_use]
    pub fn intent_for(&self, controller: &str) -> Option<&str> {
        self.spec.intent.get(controller).map(String::as_str)
    }

    /// `(controller, intent)` pairs for every controller other than the generic placement intent.
    pub fn controller_intents(&self) -> impl Iterator<Item = (&str, &str)> {
        self.spec
            .intent
            .iter()
            .filter(|(k, _)| {
                *k != GENERIC_PLACEMENT_INTENT_KEY && *k != GENERIC_PLACEMENT_INTENT_KEY_OLD
            })
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

impl DigIntent {
    fn check(&self) -> Result<()> {
        if self.spec.intent.is_empty() {
            return Err(Error::invalid("is required").with_field("spec.intent"));
        }
        if self.spec.intent.contains_key(GENERIC_PLACEMENT_INTENT_KEY)
            && self
                .spec
                .intent
                .contains_key(GENERIC_PLACEMENT_INTENT_KEY_OLD)
        {
            return Err(Error::invalid(format!(
                "both {GENERIC_PLACEMENT_INTENT_KEY} and {GENERIC_PLACEMENT_INTENT_KEY_OLD} are set"
            ))
            .with_field("spec.intent"));
        }
        for (controller, intent) in &self.spec.intent {
            if controller.is_empty() {
                return Err(
                    Error::invalid("controller names must not be empty").with_field("spec.intent")
                );
            }
            check_max_len("spec.intent", controller, NAME_MAX)?;
            check_reference(&format!("spec.intent.{controller}"), intent)?;
        }
        Ok(())
    }
}

/// `DIG/generic-placement-intents/{gpi}`: `{metadata}`. The `spec.logicalCloud` that old
/// clients send is accepted and ignored: the DIG names the logical cloud.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(metadata, schema = crate::schemas::GENERIC_PLACEMENT_INTENT)]
#[serde(rename_all = "camelCase")]
pub struct GenericPlacementIntent {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::Named;
    use crate::model::test_util::assert_invalid;

    fn dig() -> DeploymentIntentGroup {
        serde_json::from_value(json!({
            "metadata": {"name": "collection-deployment-intent-group", "description": "description"},
            "spec": {
                "compositeProfile": "collection-composite-profile",
                "version": "r1",
                "logicalCloud": "lc1",
                "overrideValues": [{"app": "nginx", "values": {"service.type": "NodePort"}}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn dig_round_trip_and_accessors() {
        let d = dig();
        assert!(d.validate().is_ok());
        assert_eq!(d.name(), "collection-deployment-intent-group");
        assert_eq!(d.release_name(), "r1");
        assert_eq!(
            d.override_values_for("nginx").get("service.type"),
            Some(&"NodePort")
        );
        assert!(d.override_values_for("other").is_empty());
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(
            json["spec"],
            json!({
                "compositeProfile": "collection-composite-profile",
                "version": "r1",
                "logicalCloud": "lc1",
                "overrideValues": [{"app": "nginx", "values": {"service.type": "NodePort"}}]
            })
        );
        assert_eq!(
            serde_json::from_value::<DeploymentIntentGroup>(json).unwrap(),
            d
        );
    }

    #[test]
    fn dig_alias_and_empty_override_values() {
        let d: DeploymentIntentGroup = serde_json::from_value(json!({
            "metadata": {"name": "d"},
            "spec": {"profile": "cp", "version": "r1", "logical-cloud": "lc",
                     "override-values": [{"app": "a", "values": {"x": "1"}}], "extra": 1}
        }))
        .unwrap();
        assert_eq!(d.spec.override_values.len(), 1);
        assert_eq!(
            (
                d.spec.composite_profile.as_str(),
                d.spec.logical_cloud.as_str()
            ),
            ("cp", "lc")
        );
        assert!(d.validate().is_ok());
        let none: DeploymentIntentGroup = serde_json::from_value(json!({
            "metadata": {"name": "d"},
            "spec": {"compositeProfile": "cp", "version": "r1", "logicalCloud": "lc", "overrideValues": []}
        }))
        .unwrap();
        assert!(none.validate().is_ok());
    }

    #[test]
    fn dig_rules() {
        let mut d = dig();
        d.spec.composite_profile.clear();
        assert_invalid(&d, "spec.compositeProfile");
        let mut d = dig();
        d.spec.version.clear();
        assert_invalid(&d, "spec.version");
        let mut d = dig();
        d.spec.version = "v".repeat(129);
        assert_invalid(&d, "spec.version");
        let mut d = dig();
        d.spec.logical_cloud = "bad cloud".into();
        assert_invalid(&d, "spec.logicalCloud");
        let mut d = dig();
        d.spec.override_values[0].app.clear();
        assert_invalid(&d, "spec.overrideValues[0].app");
        let mut d = dig();
        d.spec.override_values[0]
            .values
            .insert(" ".into(), "x".into());
        assert_invalid(&d, "spec.overrideValues[0].values");
        let mut d = dig();
        d.metadata.name.clear();
        assert_invalid(&d, "metadata.name");
    }

    #[test]
    fn dig_intent_accessors() {
        let i: DigIntent = serde_json::from_value(json!({
            "metadata": {"name": "collection-deployment-intent", "description": "description"},
            "spec": {"intent": {"genericPlacementIntent": "collection-placement-intent", "dtc": "collectd-dtc-intent"}}
        }))
        .unwrap();
        assert!(i.validate().is_ok());
        assert_eq!(
            i.generic_placement_intent(),
            Some("collection-placement-intent")
        );
        assert_eq!(i.intent_for("dtc"), Some("collectd-dtc-intent"));
        assert_eq!(
            i.controller_intents().collect::<Vec<_>>(),
            vec![("dtc", "collectd-dtc-intent")]
        );
        assert_eq!(
            serde_json::to_value(&i).unwrap()["spec"],
            json!({"intent": {"dtc": "collectd-dtc-intent", "genericPlacementIntent": "collection-placement-intent"}})
        );

        let old: DigIntent = serde_json::from_value(json!({
            "metadata": {"name": "i"},
            "spec": {"intent": {"generic-placement-intent": "gpi-name"}}
        }))
        .unwrap();
        assert_eq!(old.generic_placement_intent(), Some("gpi-name"));
        assert_eq!(old.controller_intents().count(), 0);
    }

    #[test]
    fn dig_intent_rules() {
        let empty = DigIntent {
            metadata: Metadata::named("i"),
            ..DigIntent::default()
        };
        assert_invalid(&empty, "spec.intent");
        let mut bad = empty.clone();
        bad.spec.intent.insert("gac".into(), String::new());
        assert_invalid(&bad, "spec.intent.gac");
        let mut bad = empty.clone();
        bad.spec.intent.insert(String::new(), "x".into());
        assert_invalid(&bad, "spec.intent");
        let mut both = empty;
        both.spec
            .intent
            .insert(GENERIC_PLACEMENT_INTENT_KEY.into(), "a".into());
        both.spec
            .intent
            .insert(GENERIC_PLACEMENT_INTENT_KEY_OLD.into(), "b".into());
        assert_invalid(&both, "spec.intent");
    }

    #[test]
    fn generic_placement_intent_ignores_logical_cloud() {
        let g: GenericPlacementIntent = serde_json::from_value(json!({
            "metadata": {"name": "collection-placement-intent", "description": "description for app"},
            "spec": {"logicalCloud": "lc1"}
        }))
        .unwrap();
        assert!(g.validate().is_ok());
        assert_eq!(
            serde_json::to_value(&g).unwrap(),
            json!({"metadata": {"name": "collection-placement-intent", "description": "description for app",
                                "userData1": "", "userData2": ""}})
        );
        assert_invalid(&GenericPlacementIntent::default(), "metadata.name");
    }
}
