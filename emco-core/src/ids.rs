//! Typed identities: what the stores and records keep as text, parsed once.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The id of an AppContext. Records and keys keep it as decimal text (`"1234"`, EMCO's
/// `/context/1234/`); parse it with [`str::parse`] or [`ContextId::from_record`]. In emco-rs's
/// own JSON records (a rollout's) it is the number.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ContextId(u64);

/// The number alone, as EMCO's logs and messages show an id.
impl fmt::Debug for ContextId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl ContextId {
    /// The context numbered `id`.
    #[must_use]
    pub const fn new(id: u64) -> Self {
        Self(id)
    }

    /// The number.
    #[must_use]
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The id a stored record names as `text` (`what` says which record, for the error).
    ///
    /// # Errors
    /// Internal: a stored id that is not one means the store is corrupt, never a bad request.
    pub fn from_record(text: &str, what: impl fmt::Display) -> Result<Self> {
        text.parse().map_err(|e: Error| {
            Error::internal(format!("{what} names AppContext {text:?}, not an id")).with_source(e)
        })
    }
}

impl ContextId {
    /// The id a request names in its field `field` (a gRPC field, as decimal text); blank
    /// means none.
    ///
    /// # Errors
    /// `InvalidArgument`, naming the field, when the text is not an id.
    pub fn from_wire(field: &str, text: &str) -> Result<Option<Self>> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        text.parse().map(Some).map_err(|e: Error| {
            Error::invalid(format!("{field} {text:?} is not an AppContext id"))
                .with_field(field)
                .with_source(e)
        })
    }

    /// As [`ContextId::from_wire`], for a field that must name one.
    ///
    /// # Errors
    /// `InvalidArgument`, naming the field, when it is blank or not an id.
    pub fn required_from_wire(field: &str, text: &str) -> Result<Self> {
        Self::from_wire(field, text)?
            .ok_or_else(|| Error::invalid(format!("{field} is required")).with_field(field))
    }
}

impl From<u64> for ContextId {
    fn from(id: u64) -> Self {
        Self(id)
    }
}

impl From<ContextId> for u64 {
    fn from(id: ContextId) -> Self {
        id.0
    }
}

impl fmt::Display for ContextId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for ContextId {
    type Err = Error;

    /// Decimal digits only, as EMCO writes ids (no sign, no spaces).
    fn from_str(s: &str) -> Result<Self> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Error::invalid(format!("{s:?} is not an AppContext id")));
        }
        s.parse()
            .map(Self)
            .map_err(|e| Error::invalid(format!("{s:?} is not an AppContext id")).with_source(e))
    }
}

/// A deployment intent group, by the names EMCO's URLs give it. Serde uses EMCO's path
/// parameter names, so a route's path deserializes straight into it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DigRef {
    /// The project.
    pub project: String,
    /// The composite app.
    #[serde(rename = "compositeApp")]
    pub composite_app: String,
    /// The composite app's version.
    #[serde(rename = "compositeAppVersion")]
    pub version: String,
    /// The group's own name.
    #[serde(rename = "deploymentIntentGroup")]
    pub dig: String,
}

impl DigRef {
    /// The group `dig` of `composite_app`/`version` in `project`.
    #[must_use]
    pub fn new(
        project: impl Into<String>,
        composite_app: impl Into<String>,
        version: impl Into<String>,
        dig: impl Into<String>,
    ) -> Self {
        Self {
            project: project.into(),
            composite_app: composite_app.into(),
            version: version.into(),
            dig: dig.into(),
        }
    }

    /// Every name given, as a store key needs.
    ///
    /// # Errors
    /// InvalidArgument naming the first empty part by its EMCO parameter name.
    pub fn checked(self) -> Result<Self> {
        non_empty(&[
            ("project", &self.project),
            ("compositeApp", &self.composite_app),
            ("compositeAppVersion", &self.version),
            ("deploymentIntentGroup", &self.dig),
        ])?;
        Ok(self)
    }
}

impl fmt::Display for DigRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            project,
            composite_app,
            version,
            dig,
        } = self;
        write!(f, "{project}/{composite_app}/{version}/{dig}")
    }
}

/// A logical cloud of a project, by EMCO's path parameter names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LogicalCloudRef {
    /// The project.
    pub project: String,
    /// The logical cloud's name.
    #[serde(rename = "logicalCloud")]
    pub logical_cloud: String,
}

impl LogicalCloudRef {
    /// Logical cloud `logical_cloud` of `project`.
    #[must_use]
    pub fn new(project: impl Into<String>, logical_cloud: impl Into<String>) -> Self {
        Self {
            project: project.into(),
            logical_cloud: logical_cloud.into(),
        }
    }

    /// Both names given.
    ///
    /// # Errors
    /// InvalidArgument naming the empty part.
    pub fn checked(self) -> Result<Self> {
        non_empty(&[
            ("project", &self.project),
            ("logicalCloud", &self.logical_cloud),
        ])?;
        Ok(self)
    }
}

/// A resource of an AppContext as EMCO names it: `<metadata.name>+<Kind>` (`web+Deployment`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceName {
    name: String,
    kind: String,
}

impl ResourceName {
    /// The resource `name` of `kind`.
    #[must_use]
    pub fn new(name: impl Into<String>, kind: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            kind: kind.into(),
        }
    }

    /// The object's `metadata.name`.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The object's `kind`.
    #[must_use]
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The name and kind of the string form `key` without building a [`ResourceName`]; None
    /// when it has no `+`.
    #[must_use]
    pub fn split(key: &str) -> Option<(&str, &str)> {
        key.split_once('+')
    }
}

impl fmt::Display for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}+{}", self.name, self.kind)
    }
}

impl FromStr for ResourceName {
    type Err = Error;

    /// Parses `name+Kind` (a Kubernetes name holds no `+`).
    ///
    /// # Errors
    /// InvalidArgument when there is no `+` or either side is empty.
    fn from_str(s: &str) -> Result<Self> {
        match Self::split(s) {
            Some((name, kind)) if !name.is_empty() && !kind.is_empty() => Ok(Self::new(name, kind)),
            _ => Err(Error::invalid(format!(
                "{s:?} is not a resource name: expected <name>+<Kind>"
            ))),
        }
    }
}

fn non_empty(parts: &[(&str, &String)]) -> Result<()> {
    match parts.iter().find(|(_, value)| value.is_empty()) {
        Some((name, _)) => Err(Error::invalid("must not be empty").with_field(*name)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn ids_round_trip_as_decimal_text_only() {
        let id: ContextId = "6714823149829741".parse().unwrap();
        assert_eq!(id.get(), 6_714_823_149_829_741);
        assert_eq!(id.to_string(), "6714823149829741");
        for bad in ["", "+1", " 1", "1a", "-3", "99999999999999999999"] {
            assert_eq!(
                bad.parse::<ContextId>().unwrap_err().kind(),
                ErrorKind::InvalidArgument,
                "{bad:?}"
            );
        }
        let stored = ContextId::from_record("x1", "the state of dig d").unwrap_err();
        assert_eq!(stored.kind(), ErrorKind::Internal);
        assert!(stored.message().contains("the state of dig d"), "{stored}");
    }

    #[test]
    fn wire_ids_are_trimmed_and_blank_is_none() {
        assert_eq!(
            ContextId::from_wire("app_context", " 42\n").unwrap(),
            Some(ContextId::new(42))
        );
        assert_eq!(ContextId::from_wire("update_from", "  ").unwrap(), None);
        let bad = ContextId::from_wire("app_context", "4x").unwrap_err();
        assert_eq!(bad.kind(), ErrorKind::InvalidArgument);
        assert_eq!(bad.field(), Some("app_context"));
        let blank = ContextId::required_from_wire("appContext", "").unwrap_err();
        assert_eq!(blank.message(), "appContext is required");
    }

    #[test]
    fn resource_names_round_trip() {
        let r: ResourceName = "web+Deployment".parse().unwrap();
        assert_eq!((r.name(), r.kind()), ("web", "Deployment"));
        assert_eq!(r, ResourceName::new("web", "Deployment"));
        assert_eq!(r.to_string(), "web+Deployment");
        for bad in ["web", "+Deployment", "web+", ""] {
            assert_eq!(
                bad.parse::<ResourceName>().unwrap_err().kind(),
                ErrorKind::InvalidArgument,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn references_read_emco_path_parameters_and_context_cluster_names() {
        let dig: DigRef = serde_json::from_value(serde_json::json!({
            "project": "p", "compositeApp": "ca", "compositeAppVersion": "v1",
            "deploymentIntentGroup": "d", "genericPlacementIntent": "ignored"
        }))
        .unwrap();
        assert_eq!(dig, DigRef::new("p", "ca", "v1", "d"));
        assert_eq!(dig.to_string(), "p/ca/v1/d");
        let empty = DigRef::new("p", "", "v1", "d").checked().unwrap_err();
        assert_eq!(empty.kind(), ErrorKind::InvalidArgument);
        assert!(empty.to_string().contains("compositeApp"), "{empty}");

        assert!(LogicalCloudRef::new("p", "").checked().is_err());
    }
}
