//! Which Helm release's behaviour rendering matches: the one choice both the values
//! coalescing and the manifest splitting depend on.

use std::sync::LazyLock;

use emco_core::Error;

/// Which Helm release's `helm template` to match. The lines differ in the whitespace each
/// manifest keeps (Helm's `SplitManifests`) and in how chart-default nulls are coalesced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HelmCompat {
    /// Helm 3 (and, for the manifest text, Helm 4.0 and 4.1): every manifest is trimmed; a
    /// null deletes a key only where the user set it.
    V3,
    /// Helm 4.2.0 to 4.2.3: manifests are only left-trimmed, but the separator takes the
    /// whitespace before it, so only the last manifest of a template keeps its trailing
    /// newlines. Nulls in chart defaults are dropped (helm#32530, helm#32132).
    V4_2_0,
    /// Helm 4.2.4 and later (helm#32327): a manifest ends where a line starting with `---`
    /// begins and keeps its trailing whitespace. Nulls as 4.2.0.
    #[default]
    V4_2_4,
}

impl HelmCompat {
    /// The line a Helm version (`3.14.2`, `v4.2.1`, `4.2`, `4`) belongs to.
    ///
    /// # Errors
    /// `InvalidArgument` for something that is not a Helm 3 or 4 version.
    pub fn from_version(version: &str) -> Result<Self, Error> {
        let bad = || Error::invalid(format!("helm version {version:?}: expected 3.x.y or 4.x.y"));
        let v = version.trim().trim_start_matches('v');
        let mut parts = v.split('.').map(str::parse::<u64>);
        let major = parts.next().and_then(Result::ok).ok_or_else(bad)?;
        let minor = parts
            .next()
            .transpose()
            .map_err(|_| bad())?
            .unwrap_or(u64::MAX);
        let patch = parts
            .next()
            .transpose()
            .map_err(|_| bad())?
            .unwrap_or(u64::MAX);
        match (major, minor, patch) {
            (3, ..) | (4, 0 | 1, _) => Ok(Self::V3),
            (4, 2, 0..=3) => Ok(Self::V4_2_0),
            (4, ..) => Ok(Self::V4_2_4),
            _ => Err(bad()),
        }
    }

    /// Whether nulls in chart defaults are dropped (Helm 4.2).
    pub(crate) const fn drops_default_nulls(self) -> bool {
        !matches!(self, Self::V3)
    }

    /// Helm's `SplitManifests` of this line: the documents of a stream, empty ones dropped.
    #[must_use]
    pub fn split_manifests(self, text: &str) -> Vec<String> {
        static SEP: LazyLock<Option<regex::Regex>> =
            LazyLock::new(|| regex::Regex::new(r"(?:^|\s*\n)---\s*").ok());
        let split = |text: &str| -> Vec<String> {
            match SEP.as_ref() {
                Some(sep) => sep.split(text).map(str::to_owned).collect(),
                None => vec![text.to_owned()],
            }
        };
        match self {
            Self::V3 => split(text.trim())
                .into_iter()
                .filter(|d| !d.is_empty())
                .map(|d| d.trim().to_owned())
                .collect(),
            Self::V4_2_0 => split(text.trim_start())
                .into_iter()
                .filter(|d| !d.trim().is_empty())
                .map(|d| d.trim_start().to_owned())
                .collect(),
            Self::V4_2_4 => {
                let text = text.trim_start();
                let mut docs = Vec::new();
                let mut start = 0;
                for (at, _) in text.match_indices("---") {
                    if at == 0 || text.as_bytes()[at - 1] == b'\n' {
                        docs.push(&text[start..at]);
                        start = at + 3;
                    }
                }
                docs.push(&text[start..]);
                docs.into_iter()
                    .map(str::trim_start)
                    .filter(|d| !d.is_empty())
                    .map(str::to_owned)
                    .collect()
            }
        }
    }
}
