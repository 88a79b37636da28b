//! Label and field selectors, parsed from their query-string form and matched against objects.

use serde_json::Value;

use crate::status::ApiError;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Req {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

impl Req {
    fn key(&self) -> &str {
        match self {
            Self::Eq(k, _)
            | Self::NotEq(k, _)
            | Self::In(k, _)
            | Self::NotIn(k, _)
            | Self::Exists(k)
            | Self::NotExists(k) => k,
        }
    }
}

/// The query-string form, as the real server writes it (a Scale's `status.selector`).
impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, r) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match r {
                Req::Eq(k, v) => write!(f, "{k}={v}")?,
                Req::NotEq(k, v) => write!(f, "{k}!={v}")?,
                Req::In(k, vs) => write!(f, "{k} in ({})", vs.join(","))?,
                Req::NotIn(k, vs) => write!(f, "{k} notin ({})", vs.join(","))?,
                Req::Exists(k) => f.write_str(k)?,
                Req::NotExists(k) => write!(f, "!{k}")?,
            }
        }
        Ok(())
    }
}

/// A parsed label selector (`app=web,tier in (a,b),!legacy`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector(Vec<Req>);

/// Splits on commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

fn set_values(rest: &str) -> Option<Vec<String>> {
    let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

fn bad(s: &str) -> ApiError {
    ApiError::bad_request(format!(
        "unable to parse requirement: invalid selector: '{s}'"
    ))
}

impl LabelSelector {
    /// Parses the query-string form.
    pub(crate) fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let req = if let Some(key) = part.strip_prefix('!') {
                Req::NotExists(key.trim().to_owned())
            } else if let Some((k, v)) = part.split_once("!=") {
                Req::NotEq(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                Req::Eq(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, rest)) = part.split_once(" notin ") {
                Req::NotIn(k.trim().to_owned(), set_values(rest).ok_or_else(|| bad(s))?)
            } else if let Some((k, rest)) = part.split_once(" in ") {
                Req::In(k.trim().to_owned(), set_values(rest).ok_or_else(|| bad(s))?)
            } else if part.contains(' ') || part.contains('(') {
                return Err(bad(s));
            } else {
                Req::Exists(part.to_owned())
            };
            reqs.push(req);
        }
        Ok(Self(reqs))
    }

    /// The selector a `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`) means;
    /// `None` if an expression has an unknown operator.
    pub(crate) fn from_object(sel: &Value) -> Option<Self> {
        let mut reqs = Vec::new();
        for (k, v) in sel
            .get("matchLabels")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            reqs.push(Req::Eq(
                k.clone(),
                v.as_str().unwrap_or_default().to_owned(),
            ));
        }
        for e in sel
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = e
                .get("key")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let mut values: Vec<String> = e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect();
            values.sort();
            values.dedup();
            reqs.push(match e.get("operator").and_then(Value::as_str)? {
                "In" => Req::In(key, values),
                "NotIn" => Req::NotIn(key, values),
                "Exists" => Req::Exists(key),
                "DoesNotExist" => Req::NotExists(key),
                _ => return None,
            });
        }
        // The real server's selector string sorts its requirements by key.
        reqs.sort_by(|a, b| a.key().cmp(b.key()));
        Some(Self(reqs))
    }

    /// Whether the selector has no requirement (and so matches everything).
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the object's labels satisfy every requirement.
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v.as_str()),
            Req::NotEq(k, v) => get(k) != Some(v.as_str()),
            Req::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Req::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A parsed field selector (`metadata.name=x,metadata.namespace!=y`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses the query-string form; fields are dotted paths into the object.
    pub(crate) fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let (k, eq, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            reqs.push((k.trim().to_owned(), eq, v.trim().to_owned()));
        }
        Ok(Self(reqs))
    }

    /// Whether the object satisfies every requirement (a missing field reads as "").
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, eq, want)| {
            let pointer = format!("/{}", path.replace('.', "/"));
            let got = match obj.pointer(&pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (got == *want) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors() {
        let obj = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        for (sel, want) in [
            ("app=web", true),
            ("app==web,tier=front", true),
            ("app!=web", false),
            ("tier in (front, back)", true),
            ("tier notin (front)", false),
            ("app", true),
            ("!legacy", true),
            ("!app", false),
            ("missing notin (x)", true),
            ("", true),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&obj),
                want,
                "{sel}"
            );
        }
        assert!(LabelSelector::parse("tier in front").is_err());
    }

    #[test]
    fn selector_objects_format_as_the_real_server() {
        let sel = json!({"matchLabels": {"tier": "web", "app": "x"}, "matchExpressions": [
            {"key": "env", "operator": "In", "values": ["prod", "dev"]},
            {"key": "zz", "operator": "DoesNotExist"}, {"key": "b", "operator": "Exists"}]});
        let s = LabelSelector::from_object(&sel).unwrap();
        assert_eq!(s.to_string(), "app=x,b,env in (dev,prod),tier=web,!zz");
        let obj =
            json!({"metadata": {"labels": {"app": "x", "tier": "web", "env": "dev", "b": ""}}});
        assert!(s.matches(&obj));
        assert_eq!(LabelSelector::parse(&s.to_string()).unwrap(), s);
        let bad = json!({"matchExpressions": [{"key": "a", "operator": "Gt"}]});
        assert!(LabelSelector::from_object(&bad).is_none());
        assert!(LabelSelector::from_object(&json!({})).unwrap().is_empty());
    }

    #[test]
    fn field_selectors() {
        let obj =
            json!({"metadata": {"name": "a", "namespace": "ns"}, "status": {"phase": "Running"}});
        assert!(
            FieldSelector::parse("metadata.name=a")
                .unwrap()
                .matches(&obj)
        );
        assert!(
            FieldSelector::parse("metadata.namespace!=x,status.phase=Running")
                .unwrap()
                .matches(&obj)
        );
        assert!(
            !FieldSelector::parse("metadata.name==b")
                .unwrap()
                .matches(&obj)
        );
        assert!(FieldSelector::parse("nonsense").is_err());
    }
}
