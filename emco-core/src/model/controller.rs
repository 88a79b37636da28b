//! Controller registrations: `/controllers` (orchestrator placement and action controllers, and
//! rsync) and `/clm-controllers` (controllers clm tells about cluster events).

use serde::{Deserialize, Serialize};

use crate::Object;
use crate::error::{Error, Result};
use crate::metadata::Metadata;
use crate::model::int_or_string;
use crate::validate::{NAME_MAX, check_max_len, check_one_of, check_range, check_required};

/// Lowest priority a controller may have; controllers are called in ascending priority.
pub const PRIORITY_MIN: i64 = 1;
/// Highest priority a controller may have.
pub const PRIORITY_MAX: i64 = 1_000_000;

/// What a controller registered under `/controllers` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControllerKind {
    /// Filters the candidate clusters of each app (`FilterClusters`).
    Placement,
    /// Adds or changes resources of the AppContext (`UpdateAppContext`).
    Action,
    /// No type: rsync, which EMCO registers without one.
    Untyped,
}

impl ControllerKind {
    /// The non-empty values `spec.type` accepts; empty means untyped.
    pub const ALLOWED: [&'static str; 2] = ["placement", "action"];

    /// Parses EMCO's spelling.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "placement" => Some(Self::Placement),
            "action" => Some(Self::Action),
            "" => Some(Self::Untyped),
            _ => None,
        }
    }
}

/// `/controllers/{controller}`: `{metadata, spec:{host, port, type, priority}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(metadata, check = Self::check)]
#[serde(rename_all = "camelCase")]
pub struct Controller {
    /// Name and descriptions; the name is how DIG intents refer to the controller.
    #[serde(default)]
    pub metadata: Metadata,
    /// Where and how to call it.
    #[serde(default)]
    pub spec: ControllerSpec,
}

/// The `spec` of a [`Controller`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerSpec {
    /// Host name or IP address of the controller's gRPC server.
    #[serde(default)]
    pub host: String,
    /// Its gRPC port, `1..=65535`; a number or (as EMCO's OpenAPI documents) a numeric string.
    #[serde(default, deserialize_with = "int_or_string::deserialize")]
    pub port: i64,
    /// `"placement"`, `"action"`, or empty (rsync). Kept as text so that a wrong value is a
    /// validation error; see [`Controller::kind`].
    #[serde(default, rename = "type")]
    pub kind: String,
    /// Call order among controllers of the same type, `1..=1000000`; 0 means not given (EMCO's
    /// own examples register rsync and placement controllers without one).
    #[serde(default, deserialize_with = "int_or_string::deserialize")]
    pub priority: i64,
}

impl Controller {
    /// The typed `spec.type`, `None` when it is not a valid value.
    #[must_use]
    pub fn kind(&self) -> Option<ControllerKind> {
        ControllerKind::parse(&self.spec.kind)
    }
}

/// Checks a controller host: required, at most 128 characters, no whitespace or slashes.
fn check_host(field: &str, host: &str) -> Result<()> {
    check_required(field, host)?;
    check_max_len(field, host, NAME_MAX)?;
    if host
        .chars()
        .any(|c| c.is_whitespace() || c == '/' || c.is_control())
    {
        return Err(
            Error::invalid(format!("{host:?} is not a host name or address")).with_field(field),
        );
    }
    Ok(())
}

/// Checks what both kinds of controller registration share.
fn check_endpoint(host: &str, port: i64, priority: i64) -> Result<()> {
    check_host("spec.host", host)?;
    check_range("spec.port", port, 1, 65535)?;
    if priority != 0 {
        check_range("spec.priority", priority, PRIORITY_MIN, PRIORITY_MAX)?;
    }
    Ok(())
}

impl Controller {
    fn check(&self) -> Result<()> {
        check_endpoint(&self.spec.host, self.spec.port, self.spec.priority)?;
        if self.spec.kind.is_empty() {
            return Ok(());
        }
        check_one_of("spec.type", &self.spec.kind, &ControllerKind::ALLOWED)
    }
}

/// `/clm-controllers/{controller}`: `{metadata, spec:{host, port, priority}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(metadata, check = Self::check)]
#[serde(rename_all = "camelCase")]
pub struct ClmController {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// Where to call it.
    #[serde(default)]
    pub spec: ClmControllerSpec,
}

/// The `spec` of a [`ClmController`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClmControllerSpec {
    /// Host name or IP address.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
    /// gRPC port, `1..=65535`.
    #[serde(
        default,
        deserialize_with = "int_or_string::deserialize",
        skip_serializing_if = "is_zero"
    )]
    pub port: i64,
    /// Call order, `1..=1000000`; 0 means not given.
    #[serde(
        default,
        deserialize_with = "int_or_string::deserialize",
        skip_serializing_if = "is_zero"
    )]
    pub priority: i64,
}

/// clm's `ControllerSpec` tags every field `omitempty` (src/clm/pkg/model/model.go).
#[allow(clippy::trivially_copy_pass_by_ref)] // serde passes a reference.
fn is_zero(n: &i64) -> bool {
    *n == 0
}

impl ClmController {
    fn check(&self) -> Result<()> {
        check_endpoint(&self.spec.host, self.spec.port, self.spec.priority)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::Named;
    use crate::model::test_util::assert_invalid;
    use crate::validate::Validate;

    fn gac() -> Controller {
        serde_json::from_value(json!({
            "metadata": {"name": "gac"},
            "spec": {"host": "10.7.100.4", "port": 9033, "type": "action", "priority": 1}
        }))
        .unwrap()
    }

    #[test]
    fn round_trip_writes_numbers() {
        let c = gac();
        assert!(c.validate().is_ok());
        assert_eq!(c.name(), "gac");
        assert_eq!(c.kind(), Some(ControllerKind::Action));
        assert_eq!(
            serde_json::to_value(&c).unwrap()["spec"],
            json!({"host": "10.7.100.4", "port": 9033, "type": "action", "priority": 1})
        );
        let from_strings: Controller = serde_json::from_value(json!({
            "metadata": {"name": "gac"},
            "spec": {"host": "10.7.100.4", "port": "9033", "type": "action", "priority": "1"}
        }))
        .unwrap();
        assert_eq!(from_strings, c);
        assert!(
            serde_json::from_value::<Controller>(
                json!({"metadata": {"name": "x"}, "spec": {"port": "abc"}})
            )
            .is_err()
        );
    }

    #[test]
    fn rsync_has_no_type_or_priority() {
        let rsync: Controller = serde_json::from_value(
            json!({"metadata": {"name": "rsync"}, "spec": {"host": "rsync", "port": 9031}}),
        )
        .unwrap();
        assert!(rsync.validate().is_ok());
        assert_eq!(rsync.kind(), Some(ControllerKind::Untyped));
        let plc: Controller = serde_json::from_value(json!({
            "metadata": {"name": "hpa-placement-controller"},
            "spec": {"host": "hpaplc", "port": 9099, "type": "placement"}
        }))
        .unwrap();
        assert!(plc.validate().is_ok());
        assert_eq!(plc.kind(), Some(ControllerKind::Placement));
    }

    #[test]
    fn rules() {
        let mut c = gac();
        c.spec.port = 0;
        assert_invalid(&c, "spec.port");
        c.spec.port = 65536;
        assert_invalid(&c, "spec.port");
        c.spec.port = 65535;
        assert!(c.validate().is_ok());

        let mut c = gac();
        c.spec.priority = 1_000_001;
        assert_invalid(&c, "spec.priority");
        c.spec.priority = -3;
        assert_invalid(&c, "spec.priority");
        c.spec.priority = 1_000_000;
        assert!(c.validate().is_ok());

        let mut c = gac();
        c.spec.kind = "filter".into();
        assert_invalid(&c, "spec.type");
        assert_eq!(c.kind(), None);

        let mut c = gac();
        c.spec.host.clear();
        assert_invalid(&c, "spec.host");
        c.spec.host = "a host".into();
        assert_invalid(&c, "spec.host");
        c.spec.host = "h".repeat(129);
        assert_invalid(&c, "spec.host");

        let mut c = gac();
        c.metadata.name = "-gac".into();
        assert_invalid(&c, "metadata.name");
    }

    #[test]
    fn clm_controller() {
        let c: ClmController = serde_json::from_value(json!({
            "metadata": {"name": "hpa-placement-controller"},
            "spec": {"host": "hpaplc", "port": 9099, "priority": 1}
        }))
        .unwrap();
        assert!(c.validate().is_ok());
        assert_eq!(
            serde_json::to_value(&c).unwrap()["spec"],
            json!({"host": "hpaplc", "port": 9099, "priority": 1})
        );
        let mut bad = c.clone();
        bad.spec.port = 70000;
        assert_invalid(&bad, "spec.port");
        let mut bad = c;
        bad.spec.priority = 2_000_000;
        assert_invalid(&bad, "spec.priority");
    }
}
