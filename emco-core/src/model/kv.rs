//! Key-value pairs, stored under clusters (`.../clusters/{cluster}/kv-pairs`), under logical
//! clouds (`.../logical-clouds/{lc}/kv-pairs`) and as GitOps cluster sync objects
//! (`.../cluster-providers/{cp}/cluster-sync-objects`); all have the same body.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Object;
use crate::error::{Error, Result};
use crate::metadata::Metadata;

/// A kv-pair value as EMCO's controllers read it (Go's `%v`): a string as it is, anything
/// else as its JSON text (`4`, `true`).
#[must_use]
pub fn kv_value_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `{metadata, spec:{kv:[{"key": value}, ...]}}`.
///
/// Each list entry is a map, usually of one key; values are kept as JSON because EMCO stores
/// whatever the client sent (strings in practice).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(metadata, check = Self::check)]
#[serde(rename_all = "camelCase")]
pub struct KvPair {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The pairs.
    #[serde(default)]
    pub spec: KvPairSpec,
}

/// The `spec` of a [`KvPair`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KvPairSpec {
    /// The entries, in the order given.
    #[serde(default)]
    pub kv: Vec<BTreeMap<String, serde_json::Value>>,
}

/// Cluster kv-pairs (clm).
pub type ClusterKvPair = KvPair;
/// Logical cloud kv-pairs (dcm).
pub type LogicalCloudKvPair = KvPair;
/// GitOps cluster sync objects (clm): the repository settings a GitOps cluster names.
pub type ClusterSyncObject = KvPair;

/// The answer of `GET .../kv-pairs/{kvPair}?key=K`: `{"value": <value>}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvValue {
    /// The value stored under the key.
    #[serde(default)]
    pub value: serde_json::Value,
}

impl KvPair {
    /// The value of `key`: the first entry that has it, as EMCO's `GET ?key=` answers.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&serde_json::Value> {
        self.spec.kv.iter().find_map(|m| m.get(key))
    }

    /// The `?key=` answer for `key`, `None` when no entry has it.
    #[must_use]
    pub fn value_of(&self, key: &str) -> Option<KvValue> {
        self.get(key).map(|v| KvValue { value: v.clone() })
    }

    /// The value of `key` when it is a string.
    #[must_use]
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(serde_json::Value::as_str)
    }

    /// Every key, in list order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.spec
            .kv
            .iter()
            .flat_map(|m| m.keys().map(String::as_str))
    }
}

impl KvPair {
    fn check(&self) -> Result<()> {
        if self.spec.kv.is_empty() {
            return Err(Error::invalid("is required").with_field("spec.kv"));
        }
        for (i, entry) in self.spec.kv.iter().enumerate() {
            if entry.is_empty() || entry.keys().any(|k| k.trim().is_empty()) {
                return Err(Error::invalid("each entry needs a non-empty key")
                    .with_field(format!("spec.kv[{i}]")));
            }
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
    use crate::validate::Validate;

    #[test]
    fn lookup_round_trip() {
        let kv: ClusterKvPair = serde_json::from_value(json!({
            "metadata": {"name": "kv1"},
            "spec": {"kv": [{"istioIngressGatewayAddress": "192.168.1.1"}, {"port": 30000}, {"a": "first"}, {"a": "second"}]}
        }))
        .unwrap();
        assert!(kv.validate().is_ok());
        assert_eq!(kv.name(), "kv1");
        assert_eq!(
            kv.get_str("istioIngressGatewayAddress"),
            Some("192.168.1.1")
        );
        assert_eq!(kv.get("port"), Some(&json!(30000)));
        assert_eq!(kv.get_str("port"), None);
        assert_eq!(kv.get_str("a"), Some("first"));
        assert_eq!(kv.get("missing"), None);
        assert_eq!(
            serde_json::to_value(kv.value_of("istioIngressGatewayAddress")).unwrap(),
            json!({"value": "192.168.1.1"})
        );
        assert_eq!(kv.value_of("missing"), None);
        assert_eq!(kv.keys().count(), 4);
        let back: KvPair = serde_json::from_value(serde_json::to_value(&kv).unwrap()).unwrap();
        assert_eq!(back, kv);
    }

    #[test]
    fn rules() {
        let empty: LogicalCloudKvPair =
            serde_json::from_value(json!({"metadata": {"name": "kv"}})).unwrap();
        assert_invalid(&empty, "spec.kv");
        let blank_key: KvPair = serde_json::from_value(
            json!({"metadata": {"name": "kv"}, "spec": {"kv": [{"a": "1"}, {"": "x"}]}}),
        )
        .unwrap();
        assert_invalid(&blank_key, "spec.kv[1]");
        let empty_entry: KvPair =
            serde_json::from_value(json!({"metadata": {"name": "kv"}, "spec": {"kv": [{}]}}))
                .unwrap();
        assert_invalid(&empty_entry, "spec.kv[0]");
        let bad_name: KvPair = serde_json::from_value(
            json!({"metadata": {"name": "k v"}, "spec": {"kv": [{"a": "1"}]}}),
        )
        .unwrap();
        assert_invalid(&bad_name, "metadata.name");
    }
}
