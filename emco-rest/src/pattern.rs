//! URL patterns to resource keys.

use std::collections::HashMap;

use emco_core::Error;
use emco_store::ResourceKey;

/// How a URL pattern maps onto a [`ResourceKey`]: every `{param}` is one key segment of type
/// `param`, except that a parameter directly following another one (`{compositeApp}/{compositeAppVersion}`)
/// joins the previous segment, whose name becomes `value1/value2`. Literal words are ignored.
///
/// So `/v2/projects/{project}/composite-apps/{compositeApp}/{compositeAppVersion}/apps/{app}`
/// keys an app as `project=p / compositeApp="ca/v1" / app=a`, and every service that uses the
/// same parameter names shares the same keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPattern {
    segments: Vec<Vec<String>>,
}

impl KeyPattern {
    /// Parses a URL pattern.
    #[must_use]
    pub fn parse(pattern: &str) -> Self {
        let mut segments: Vec<Vec<String>> = Vec::new();
        let mut previous_was_param = false;
        for part in pattern.split('/').filter(|p| !p.is_empty()) {
            match part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                Some(param) => {
                    match segments.last_mut() {
                        Some(last) if previous_was_param => last.push(param.to_owned()),
                        _ => segments.push(vec![param.to_owned()]),
                    }
                    previous_was_param = true;
                }
                None => previous_was_param = false,
            }
        }
        Self { segments }
    }

    /// The parameter names, in order.
    pub fn params(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().flatten().map(String::as_str)
    }

    /// The key named by the path parameters `values`.
    ///
    /// # Errors
    /// InvalidArgument when a parameter is missing or empty.
    pub fn key(&self, values: &HashMap<String, String>) -> Result<ResourceKey, Error> {
        let mut key = ResourceKey::root();
        for segment in &self.segments {
            let mut names = Vec::with_capacity(segment.len());
            for param in segment {
                match values.get(param) {
                    Some(v) if !v.is_empty() => names.push(v.as_str()),
                    _ => {
                        return Err(Error::invalid(format!("path parameter {param} is missing")));
                    }
                }
            }
            key = key.child(segment[0].as_str(), names.join("/"));
        }
        Ok(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjacent_params_join() {
        let p = KeyPattern::parse(
            "/v2/projects/{project}/composite-apps/{compositeApp}/{compositeAppVersion}/apps",
        );
        let values: HashMap<String, String> = [
            ("project", "p"),
            ("compositeApp", "ca"),
            ("compositeAppVersion", "v1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let key = p.key(&values).unwrap();
        assert_eq!(
            key,
            ResourceKey::root()
                .child("project", "p")
                .child("compositeApp", "ca/v1")
        );
        assert_eq!(p.params().count(), 3);
        assert!(
            KeyPattern::parse("/v2/projects/{project}")
                .key(&HashMap::new())
                .is_err()
        );
    }
}
