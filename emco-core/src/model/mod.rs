//! Serde types for every object of EMCO's REST API.
//!
//! Each body type reads EMCO's current JSON (camelCase field names), also accepts the alternative
//! spellings older clients send (`opstatus`, `loadbalancerIp`, `override-values`, ...), ignores
//! unknown fields like EMCO does, and writes EMCO's current names back so that our GET responses
//! match EMCO's. Missing fields default to empty; [`Validate`](crate::Validate) then reports a
//! missing required field as [`InvalidArgument`](crate::ErrorKind::InvalidArgument) with its path
//! (`spec.compositeAppVersion: is required`). Validation is pure: it never looks at other objects.
//!
//! ```
//! use emco_core::model::{CompositeApp, Named};
//! use emco_core::{ErrorKind, Validate};
//!
//! let ca: CompositeApp = serde_json::from_str(
//!     r#"{"metadata":{"name":"ca1"},"spec":{"compositeAppVersion":"v1"},"unknown":1}"#,
//! ).unwrap();
//! assert_eq!(ca.name(), "ca1");
//! assert!(ca.validate().is_ok());
//!
//! let bad: CompositeApp = serde_json::from_str(r#"{"metadata":{"name":"ca1"}}"#).unwrap();
//! let err = bad.validate().unwrap_err();
//! assert_eq!(err.kind(), ErrorKind::InvalidArgument);
//! assert_eq!(err.to_string(), "spec.compositeAppVersion: is required");
//! ```

pub mod cacert;
pub mod cluster;
pub mod controller;
pub mod dig;
pub mod kv;
pub mod logical_cloud;
pub mod ncm;
pub mod project;
pub mod status;

pub use cluster::{
    Cluster, ClusterLabel, ClusterProvider, ClusterSpec, ClusterWithLabels, GitOpsSpec,
};
pub use controller::{
    ClmController, ClmControllerSpec, Controller, ControllerKind, ControllerSpec,
};
pub use dig::{
    DeploymentIntentGroup, DeploymentIntentGroupSpec, DigIntent, DigIntentSpec,
    GenericPlacementIntent, OverrideValues,
};
pub use kv::{
    ClusterKvPair, ClusterSyncObject, KvPair, KvPairSpec, KvValue, LogicalCloudKvPair,
    kv_value_text,
};
pub use logical_cloud::{
    ClusterQuota, ClusterReference, ClusterReferenceSpec, LogicalCloud, LogicalCloudKind,
    LogicalCloudLevel, LogicalCloudSpec, LogicalCloudUser, UserPermission, UserPermissionSpec,
};
pub use ncm::{Network, NetworkSpec, ProviderNetwork, ProviderNetworkSpec, Subnet, Vlan};
pub use project::{
    App, AppDependency, AppDependencySpec, AppProfile, AppProfileSpec, CompositeApp,
    CompositeAppSpec, CompositeProfile, ConfigResource, OpStatus, ProfileManifest,
    ProfileManifestType, Project,
};
pub use status::StatusQuery;

use crate::error::Result;
use crate::validate::{check_name, check_required};

/// Anything with a name: the key of the object under its parent.
///
/// The REST layer uses it for the "name in the URL must equal the name in the body" rule of PUT,
/// whatever the object type.
pub trait Named {
    /// The object's name (`metadata.name`, or `clusterLabel` for a cluster label).
    fn name(&self) -> &str;

    /// The path of the field that holds the name, for error messages.
    fn name_field(&self) -> &'static str {
        "metadata.name"
    }
}

/// Checks a field that names another object (`spec.app`, `spec.logicalCloud`, ...): it is
/// required and must be a valid EMCO name.
pub(crate) fn check_reference(field: &str, value: &str) -> Result<()> {
    check_required(field, value)?;
    check_name(field, value)
}

/// Serde helpers for integers that EMCO clients send either as a JSON number (EMCO's Go types) or
/// as a numeric string (EMCO's OpenAPI description). They are written back as numbers.
pub(crate) mod int_or_string {
    use std::fmt;

    use serde::de::{self, Deserializer, Visitor};

    struct IntVisitor;

    impl Visitor<'_> for IntVisitor {
        type Value = i64;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an integer or a string holding an integer")
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
            Ok(v)
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
            i64::try_from(v).map_err(|_| E::custom(format!("integer {v} is too large")))
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<i64, E> {
            let t = v.trim();
            if t.is_empty() {
                return Ok(0);
            }
            t.parse()
                .map_err(|_| E::custom(format!("{v:?} is not an integer")))
        }
    }

    /// Reads an `i64` from a number or a numeric string; an empty string reads as 0 (absent).
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        d.deserialize_any(IntVisitor)
    }
}

/// Serde helper for string fields that some clients send as a bare number (`"level": 1`).
pub(crate) mod string_or_int {
    use std::fmt;

    use serde::de::{self, Deserializer, Visitor};

    struct StrVisitor;

    impl Visitor<'_> for StrVisitor {
        type Value = String;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string or an integer")
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_owned())
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
            Ok(v.to_string())
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
            Ok(v.to_string())
        }
    }

    /// Reads a `String` from a string or an integer.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        d.deserialize_any(StrVisitor)
    }
}

#[cfg(test)]
pub(crate) mod test_util {
    use crate::{ErrorKind, Validate};

    /// Asserts that `v` fails validation as InvalidArgument at `field`.
    #[track_caller]
    pub(crate) fn assert_invalid(v: &impl Validate, field: &str) {
        let err = v.validate().expect_err("validation should fail");
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert_eq!(err.field(), Some(field), "{err}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct N {
        #[serde(default, deserialize_with = "int_or_string::deserialize")]
        n: i64,
        #[serde(default, deserialize_with = "string_or_int::deserialize")]
        s: String,
    }

    #[test]
    fn int_or_string_accepts_both() {
        let a: N = serde_json::from_str(r#"{"n": 9031, "s": 1}"#).unwrap();
        assert_eq!((a.n, a.s.as_str()), (9031, "1"));
        let b: N = serde_json::from_str(r#"{"n": " 42 ", "s": "0"}"#).unwrap();
        assert_eq!((b.n, b.s.as_str()), (42, "0"));
        let c: N = serde_json::from_str(r#"{"n": ""}"#).unwrap();
        assert_eq!(c.n, 0);
        assert!(serde_json::from_str::<N>(r#"{"n": "x"}"#).is_err());
        assert!(serde_json::from_str::<N>(r#"{"n": 1.5}"#).is_err());
        assert!(serde_json::from_str::<N>(r#"{"n": 18446744073709551615}"#).is_err());
        assert!(serde_json::from_str::<N>(r#"{"s": true}"#).is_err());
    }

    /// Every body type decodes with unknown fields anywhere, like EMCO, and keeps its name.
    #[test]
    fn unknown_fields_are_ignored_everywhere() {
        let body = serde_json::json!({
            "metadata": {"name": "x1", "color": "blue"},
            "spec": {"nonsense": [1, 2], "kv": [{"k": "v"}]},
            "file": "chart.tgz",
            "status": {}
        });
        macro_rules! decodes {
            ($($ty:ty),+) => {$(
                let v: $ty = serde_json::from_value(body.clone())
                    .unwrap_or_else(|e| panic!("{}: {e}", stringify!($ty)));
                assert_eq!(v.name(), "x1", "{}", stringify!($ty));
            )+};
        }
        decodes!(
            Project,
            CompositeApp,
            App,
            AppDependency,
            CompositeProfile,
            AppProfile,
            DeploymentIntentGroup,
            DigIntent,
            GenericPlacementIntent,
            ClusterProvider,
            Cluster,
            ClusterWithLabels,
            KvPair,
            Controller,
            ClmController,
            LogicalCloud,
            ClusterReference,
            UserPermission
        );
        let label: ClusterLabel =
            serde_json::from_value(serde_json::json!({"clusterLabel": "x1", "extra": 1})).unwrap();
        assert_eq!(label.name(), "x1");
        let manifest: ProfileManifest = serde_json::from_value(serde_json::json!({
            "version": "v1", "type": {"values": "v.yaml", "other": 1}, "more": true
        }))
        .unwrap();
        assert_eq!(manifest.kind.values, "v.yaml");
    }

    #[test]
    fn references_are_required_names() {
        assert!(check_reference("spec.app", "a1").is_ok());
        assert_eq!(
            check_reference("spec.app", "").unwrap_err().to_string(),
            "spec.app: is required"
        );
        assert_eq!(
            check_reference("spec.app", "-x").unwrap_err().field(),
            Some("spec.app")
        );
    }
}
