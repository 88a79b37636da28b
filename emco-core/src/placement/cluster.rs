//! [`ClusterRef`]: a cluster named by its provider, written `provider+cluster` as EMCO does.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::error::{Error, Result};

/// The separator EMCO puts between provider and cluster in AppContext keys and status output.
/// Object names cannot contain it, so the first `+` splits the string unambiguously.
pub const SEPARATOR: char = '+';

/// A cluster named by its provider: `provider+cluster` in AppContext keys.
///
/// Stored as that string form in one shared allocation, so cloning is one reference-count
/// increment (placement over thousands of clusters clones freely), and clusters sort by that
/// string, as EMCO sorts them (ties, possible only with a `+` inside a name, are broken by where
/// the provider ends).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterRef {
    /// `provider+cluster`.
    key: Arc<str>,
    /// Byte offset of the separator in `key`.
    split: usize,
}

impl ClusterRef {
    /// A reference to `cluster` of `provider`. Names are not validated here: the intent
    /// validators and the inventory own that.
    pub fn new(provider: impl AsRef<str>, cluster: impl AsRef<str>) -> Self {
        let (provider, cluster) = (provider.as_ref(), cluster.as_ref());
        let mut key = String::with_capacity(provider.len() + 1 + cluster.len());
        key.push_str(provider);
        key.push(SEPARATOR);
        key.push_str(cluster);
        Self {
            key: key.into(),
            split: provider.len(),
        }
    }

    /// The cluster provider's name.
    #[must_use]
    pub fn provider(&self) -> &str {
        self.key.get(..self.split).unwrap_or_default()
    }

    /// The cluster's name within its provider.
    #[must_use]
    pub fn cluster(&self) -> &str {
        self.key.get(self.split + 1..).unwrap_or_default()
    }

    /// The string form, `provider+cluster`.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.key
    }

    /// The provider and cluster of the string form `id` (an AppContext key's part, a rollout
    /// wave's entry) without building a reference; None when it has no separator. Either part
    /// may be empty: [`ClusterRef::from_str`] refuses that.
    #[must_use]
    pub fn split(id: &str) -> Option<(&str, &str)> {
        id.split_once(SEPARATOR)
    }
}

impl fmt::Display for ClusterRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key)
    }
}

impl fmt::Debug for ClusterRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClusterRef({self})")
    }
}

impl FromStr for ClusterRef {
    type Err = Error;

    /// Parses `provider+cluster`.
    ///
    /// # Errors
    /// InvalidArgument when there is no `+` or either side is empty.
    fn from_str(s: &str) -> Result<Self> {
        match Self::split(s) {
            Some((provider, cluster)) if !provider.is_empty() && !cluster.is_empty() => {
                Ok(Self::new(provider, cluster))
            }
            _ => Err(Error::invalid(format!(
                "{s:?} is not of the form provider{SEPARATOR}cluster"
            ))),
        }
    }
}

impl serde::Serialize for ClusterRef {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ClusterRef {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_form_round_trips() {
        let c: ClusterRef = "edge+c1".parse().unwrap();
        assert_eq!(c.provider(), "edge");
        assert_eq!(c.cluster(), "c1");
        assert_eq!(c.to_string(), "edge+c1");
        assert_eq!(serde_json::to_string(&c).unwrap(), "\"edge+c1\"");
        let back: ClusterRef = serde_json::from_str("\"edge+c1\"").unwrap();
        assert_eq!(back, c);
        for bad in ["edge", "+c", "edge+", ""] {
            assert!(bad.parse::<ClusterRef>().is_err(), "{bad}");
        }
    }

    #[test]
    fn orders_by_string_form() {
        // Tuple order would put ("a", "z") before ("a b", "c"); string order puts "a b+c"
        // first (' ' < '+'): the string form decides.
        let mut v = [
            ClusterRef::new("a", "z"),
            ClusterRef::new("a b", "c"),
            ClusterRef::new("a-b", "a"),
        ];
        v.sort();
        let s: Vec<String> = v.iter().map(ToString::to_string).collect();
        let mut expected = s.clone();
        expected.sort();
        assert_eq!(s, expected);
        assert_eq!(s[0], "a b+c");
    }
}
