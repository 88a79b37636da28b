//! `metadata`, the envelope every EMCO object carries.

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

use crate::error::Result;
use crate::validate::{DESCRIPTION_MAX, USER_DATA_MAX, Validate, check_max_len, check_name};

/// `{name, description, userData1, userData2}`: identical on every EMCO object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// The object's name: its key under its parent.
    #[serde(default)]
    pub name: String,
    /// Free text, at most 1024 characters.
    #[serde(default)]
    pub description: String,
    /// Free text for the user, at most 512 characters.
    #[serde(default, alias = "userdata1", alias = "UserData1")]
    pub user_data1: String,
    /// Free text for the user, at most 512 characters.
    #[serde(default, alias = "userdata2", alias = "UserData2")]
    pub user_data2: String,
}

impl Metadata {
    /// Metadata with just a name.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }
}

impl Validate for Metadata {
    fn validate(&self) -> Result<()> {
        check_name("name", &self.name)?;
        check_max_len("description", &self.description, DESCRIPTION_MAX)?;
        check_max_len("userData1", &self.user_data1, USER_DATA_MAX)?;
        check_max_len("userData2", &self.user_data2, USER_DATA_MAX)?;
        Ok(())
    }
}

/// Writes `metadata` with its empty fields left out, as Go writes a metadata struct whose tags
/// are all `omitempty` (the orchestrator's app intents: src/orchestrator/pkg/module/app_intent.go).
///
/// # Errors
/// The serializer's.
pub fn serialize_omitempty<S: Serializer>(metadata: &Metadata, s: S) -> Result<S::Ok, S::Error> {
    let fields = [
        ("name", &metadata.name),
        ("description", &metadata.description),
        ("userData1", &metadata.user_data1),
        ("userData2", &metadata.user_data2),
    ];
    let mut map = s.serialize_map(None)?;
    for (key, value) in fields.iter().filter(|(_, v)| !v.is_empty()) {
        map.serialize_entry(key, value)?;
    }
    map.end()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_aliases() {
        let m: Metadata = serde_json::from_str(
            r#"{"name":"p1","description":"d","userdata1":"u1","UserData2":"u2","extra":1}"#,
        )
        .unwrap();
        assert_eq!(m.user_data1, "u1");
        assert_eq!(m.user_data2, "u2");
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name":"p1","description":"d","userData1":"u1","userData2":"u2"})
        );
    }

    #[test]
    fn validation_paths() {
        let mut m = Metadata::named("ok");
        assert!(m.validate().is_ok());
        m.description = "x".repeat(1025);
        assert_eq!(m.validate().unwrap_err().field(), Some("description"));
        m.description.clear();
        m.name = "bad name".into();
        assert_eq!(
            m.validate().unwrap_err().within("metadata").field(),
            Some("metadata.name")
        );
    }
}
