//! Projects, composite apps, apps, app dependencies, composite profiles, app profiles and the
//! `manifest.yaml` of an app profile archive.

use serde::{Deserialize, Serialize};

use crate::Object;
use crate::error::{Error, Result};
use crate::metadata::Metadata;
use crate::model::check_reference;
use crate::validate::{Validate, check_one_of, check_range, check_required};

/// `/projects/{project}`: `{metadata}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(metadata, schema = crate::schemas::METADATA)]
#[serde(rename_all = "camelCase")]
pub struct Project {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
}

/// `.../composite-apps/{compositeApp}/{version}`: `{metadata, spec:{compositeAppVersion}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(
    metadata,
    check = |c: &Self| check_reference("spec.compositeAppVersion", &c.spec.composite_app_version),
    schema = crate::schemas::COMPOSITE_APP
)]
#[serde(rename_all = "camelCase")]
pub struct CompositeApp {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The version.
    #[serde(default)]
    pub spec: CompositeAppSpec,
}

/// The `spec` of a [`CompositeApp`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompositeAppSpec {
    /// The version, the last segment of the composite app's URL. Early emcoctl files call it
    /// `version`.
    #[serde(default, alias = "version")]
    pub composite_app_version: String,
}

/// `CA/apps/{app}`: `{metadata}`; the Helm chart travels beside it as the multipart `file`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(metadata, schema = crate::schemas::METADATA)]
#[serde(rename_all = "camelCase")]
pub struct App {
    /// Name and descriptions; the name is the chart's directory name.
    #[serde(default)]
    pub metadata: Metadata,
}

/// What an app waits for in the app it depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpStatus {
    /// Every resource of the app is ready on every cluster.
    Ready,
    /// Every resource of the app is applied.
    Deployed,
}

impl OpStatus {
    /// The values `spec.opStatus` accepts.
    pub const ALLOWED: [&'static str; 2] = ["Ready", "Deployed"];

    /// Parses EMCO's spelling.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "Ready" => Some(Self::Ready),
            "Deployed" => Some(Self::Deployed),
            _ => None,
        }
    }

    /// EMCO's spelling (`"Ready"`, `"Deployed"`).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "Ready",
            Self::Deployed => "Deployed",
        }
    }
}

/// Longest `spec.wait` of an app dependency, in seconds.
pub const DEPENDENCY_WAIT_MAX: i64 = 4096;

/// `CA/apps/{app}/dependency/{dependency}`: `{metadata, spec:{app, opStatus, wait}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(metadata, check = Self::check, schema = crate::schemas::APP_DEPENDENCY)]
#[serde(rename_all = "camelCase")]
pub struct AppDependency {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// What the app waits for.
    #[serde(default)]
    pub spec: AppDependencySpec,
}

/// The `spec` of an [`AppDependency`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppDependencySpec {
    /// The app depended on.
    #[serde(default)]
    pub app: String,
    /// `"Ready"` or `"Deployed"`; EMCO also reads `opstatus`. Kept as text so that a wrong value
    /// is a validation error (400) rather than a decoding error (422); see
    /// [`AppDependency::op_status`].
    #[serde(default, alias = "opstatus")]
    pub op_status: String,
    /// Seconds to wait once the status is reached, `0..=4096`.
    #[serde(default)]
    pub wait: i64,
}

impl AppDependency {
    /// The typed `spec.opStatus`, `None` when it is not a valid value.
    #[must_use]
    pub fn op_status(&self) -> Option<OpStatus> {
        OpStatus::parse(&self.spec.op_status)
    }
}

impl AppDependency {
    fn check(&self) -> Result<()> {
        check_reference("spec.app", &self.spec.app)?;
        check_required("spec.opStatus", &self.spec.op_status)?;
        check_one_of("spec.opStatus", &self.spec.op_status, &OpStatus::ALLOWED)?;
        check_range("spec.wait", self.spec.wait, 0, DEPENDENCY_WAIT_MAX)
    }
}

/// `CA/composite-profiles/{compositeProfile}`: `{metadata}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(metadata, schema = crate::schemas::METADATA)]
#[serde(rename_all = "camelCase")]
pub struct CompositeProfile {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
}

/// `.../composite-profiles/{cp}/profiles/{appProfile}`: `{metadata, spec:{app}}`; the profile
/// archive travels beside it as the multipart `file`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(
    metadata,
    check = |p: &Self| check_reference("spec.app", &p.spec.app),
    schema = crate::schemas::METADATA
)]
#[serde(rename_all = "camelCase")]
pub struct AppProfile {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The app the profile customizes.
    #[serde(default)]
    pub spec: AppProfileSpec,
}

/// The `spec` of an [`AppProfile`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppProfileSpec {
    /// The app's name.
    #[serde(default)]
    pub app: String,
}

/// `manifest.yaml` of an app profile archive:
/// `{version, type:{values, configresource:[{filepath, chartpath}]}}`.
///
/// Only the serde shape; the YAML text is read by the caller with a YAML parser.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileManifest {
    /// The manifest format version (`v1`).
    #[serde(default)]
    pub version: String,
    /// What the profile contains.
    #[serde(default, rename = "type")]
    pub kind: ProfileManifestType,
}

/// The `type` of a [`ProfileManifest`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileManifestType {
    /// Path, inside the archive, of the values file layered over the chart's values
    /// (`override_values.yaml`). Empty: no values file.
    #[serde(default)]
    pub values: String,
    /// Files of the archive copied into the chart before rendering.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configresource: Vec<ConfigResource>,
}

/// One file copied from the profile archive into the chart.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigResource {
    /// Path of the file inside the profile archive.
    #[serde(default)]
    pub filepath: String,
    /// Path inside the chart to copy it to (`templates/extra.yaml`).
    #[serde(default)]
    pub chartpath: String,
}

/// Checks that `path` is relative and stays inside its root (no `..`, no leading `/`), because
/// profile files are copied into the chart directory and must not escape it.
fn check_relative_path(field: &str, path: &str) -> Result<()> {
    let escapes = path.starts_with('/')
        || path.starts_with('\\')
        || path.split(['/', '\\']).any(|seg| seg == "..")
        || path.contains('\0');
    if escapes {
        return Err(Error::invalid(format!(
            "{path:?} must be a relative path inside the archive"
        ))
        .with_field(field));
    }
    Ok(())
}

impl Validate for ProfileManifest {
    fn validate(&self) -> Result<()> {
        check_relative_path("type.values", &self.kind.values)?;
        for (i, res) in self.kind.configresource.iter().enumerate() {
            let at = |f: &str| format!("type.configresource[{i}].{f}");
            check_required(&at("filepath"), &res.filepath)?;
            check_relative_path(&at("filepath"), &res.filepath)?;
            check_required(&at("chartpath"), &res.chartpath)?;
            check_relative_path(&at("chartpath"), &res.chartpath)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::Named;
    use crate::model::test_util::assert_invalid;

    #[test]
    fn project_round_trip_ignores_unknown_fields() {
        let p: Project = serde_json::from_value(json!({
            "metadata": {"name": "proj1", "description": "d", "userData1": "u1", "userData2": "u2"},
            "spec": {"whatever": true}
        }))
        .unwrap();
        assert_eq!(p.name(), "proj1");
        assert!(p.validate().is_ok());
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!({"metadata": {"name": "proj1", "description": "d", "userData1": "u1", "userData2": "u2"}})
        );
        assert_invalid(&Project::default(), "metadata.name");
    }

    #[test]
    fn composite_app_version_and_alias() {
        let ca: CompositeApp = serde_json::from_value(json!({
            "metadata": {"name": "prometheus-collectd-composite-app", "description": "test"},
            "spec": {"compositeAppVersion": "v1"}
        }))
        .unwrap();
        assert!(ca.validate().is_ok());
        let json = serde_json::to_value(&ca).unwrap();
        assert_eq!(json["spec"], json!({"compositeAppVersion": "v1"}));
        assert_eq!(serde_json::from_value::<CompositeApp>(json).unwrap(), ca);

        let old: CompositeApp = serde_json::from_value(
            json!({"metadata": {"name": "vFw-demo"}, "spec": {"version": "v1"}}),
        )
        .unwrap();
        assert_eq!(old.spec.composite_app_version, "v1");

        let missing: CompositeApp =
            serde_json::from_value(json!({"metadata": {"name": "a"}})).unwrap();
        assert_invalid(&missing, "spec.compositeAppVersion");
        let bad = CompositeApp {
            metadata: Metadata::named("a"),
            spec: CompositeAppSpec {
                composite_app_version: "v 1".into(),
            },
        };
        assert_invalid(&bad, "spec.compositeAppVersion");
    }

    #[test]
    fn app_and_profiles() {
        let app: App = serde_json::from_value(
            json!({"metadata": {"name": "collectd", "description": "description for app"}}),
        )
        .unwrap();
        assert!(app.validate().is_ok());
        assert_invalid(
            &App {
                metadata: Metadata::named("bad/name"),
            },
            "metadata.name",
        );

        let cp: CompositeProfile =
            serde_json::from_value(json!({"metadata": {"name": "cp1"}})).unwrap();
        assert!(cp.validate().is_ok());

        let ap: AppProfile = serde_json::from_value(json!({
            "metadata": {"name": "profile1", "description": "test"},
            "spec": {"app": "collectd"}
        }))
        .unwrap();
        assert!(ap.validate().is_ok());
        assert_eq!(
            serde_json::to_value(&ap).unwrap()["spec"],
            json!({"app": "collectd"})
        );
        let no_app = AppProfile {
            metadata: Metadata::named("p"),
            ..AppProfile::default()
        };
        assert_invalid(&no_app, "spec.app");
    }

    #[test]
    fn dependency_rules_and_alias() {
        let d: AppDependency = serde_json::from_value(json!({
            "metadata": {"name": "app2"},
            "spec": {"app": "app2", "opStatus": "Ready", "wait": 10}
        }))
        .unwrap();
        assert!(d.validate().is_ok());
        assert_eq!(d.op_status(), Some(OpStatus::Ready));
        assert_eq!(
            serde_json::to_value(&d).unwrap()["spec"],
            json!({"app": "app2", "opStatus": "Ready", "wait": 10})
        );

        let lower: AppDependency = serde_json::from_value(json!({
            "metadata": {"name": "d"},
            "spec": {"app": "a", "opstatus": "Deployed"}
        }))
        .unwrap();
        assert_eq!(lower.op_status(), Some(OpStatus::Deployed));
        assert_eq!(lower.spec.wait, 0);
        assert!(lower.validate().is_ok());
        assert_eq!(OpStatus::Deployed.as_str(), "Deployed");

        let mut bad = d.clone();
        bad.spec.op_status = "Up".into();
        assert_invalid(&bad, "spec.opStatus");
        assert_eq!(bad.op_status(), None);
        bad.spec.op_status.clear();
        assert_invalid(&bad, "spec.opStatus");

        let mut w = d.clone();
        w.spec.wait = 4096;
        assert!(w.validate().is_ok());
        w.spec.wait = 4097;
        assert_invalid(&w, "spec.wait");
        w.spec.wait = -1;
        assert_invalid(&w, "spec.wait");

        let mut a = d;
        a.spec.app.clear();
        assert_invalid(&a, "spec.app");
    }

    #[test]
    fn manifest_shapes_and_paths() {
        let m: ProfileManifest = serde_json::from_value(
            json!({"version": "v1", "type": {"values": "override_values.yaml"}}),
        )
        .unwrap();
        assert_eq!(m.kind.values, "override_values.yaml");
        assert!(m.validate().is_ok());
        assert_eq!(
            serde_json::to_value(&m).unwrap(),
            json!({"version": "v1", "type": {"values": "override_values.yaml"}})
        );

        let full: ProfileManifest = serde_json::from_value(json!({
            "version": "v1",
            "type": {
                "values": "override_values.yaml",
                "configresource": [{"filepath": "testfile.yaml", "chartpath": "vault-consul-dev/templates/testfile.yaml"}]
            }
        }))
        .unwrap();
        assert!(full.validate().is_ok());
        assert_eq!(
            serde_json::from_value::<ProfileManifest>(serde_json::to_value(&full).unwrap())
                .unwrap(),
            full
        );

        let mut esc = full.clone();
        esc.kind.configresource[0].chartpath = "../../etc/passwd".into();
        assert_invalid(&esc, "type.configresource[0].chartpath");
        let mut abs = full.clone();
        abs.kind.configresource[0].filepath = "/etc/passwd".into();
        assert_invalid(&abs, "type.configresource[0].filepath");
        let mut empty = full.clone();
        empty.kind.configresource[0].filepath.clear();
        assert_invalid(&empty, "type.configresource[0].filepath");
        let mut vals = full;
        vals.kind.values = "a/../../x".into();
        assert_invalid(&vals, "type.values");
    }
}
