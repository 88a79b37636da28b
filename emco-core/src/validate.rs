//! Validation of model objects, with errors that name the offending field.
//!
//! Each model type implements [`Validate`]; nested values report paths relative to themselves and
//! the caller places them with [`Error::within`], so a failure deep in an intent reads
//! `spec.intent.allOf[1].clusterLabel: ...`.

use crate::error::{Error, Result};

/// A value that can check itself against EMCO's schema rules.
pub trait Validate {
    /// Checks the value.
    ///
    /// # Errors
    /// An [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) error whose field path
    /// names the first rule that failed.
    fn validate(&self) -> Result<()>;

    /// The JSON schema EMCO's handler checks this body against before anything else
    /// (gojsonschema, on the body as Go writes it back); `None` when it checks none.
    #[must_use]
    fn schema() -> Option<&'static emco_go::jsonschema::Schema>
    where
        Self: Sized,
    {
        None
    }

    /// The answer to a body [`Validate::schema`] refuses, from the schema's `Invalid Input:`
    /// text (some handlers answer in their own words).
    #[must_use]
    fn schema_message(text: String) -> String
    where
        Self: Sized,
    {
        text
    }

    /// Whether EMCO's handler runs [`Validate::validate`] before [`Validate::schema`] (gac's
    /// own checks come first).
    #[must_use]
    fn checks_before_schema() -> bool
    where
        Self: Sized,
    {
        false
    }

    /// The answer to an empty body (EMCO's handlers answer `Empty body`; some their own words).
    #[must_use]
    fn empty_body_message() -> &'static str
    where
        Self: Sized,
    {
        "Empty body"
    }

    /// The answer (a 422) to a body that does not decode, from the decoder's `error`.
    #[must_use]
    fn undecodable_message(error: &str) -> String
    where
        Self: Sized,
    {
        format!("the request body is not valid: {error}")
    }

    /// Whether EMCO's PUT handler checks [`Validate::schema`] too (some check it on POST only).
    #[must_use]
    fn schema_on_put() -> bool
    where
        Self: Sized,
    {
        true
    }
}

impl<T: Validate> Validate for Vec<T> {
    fn validate(&self) -> Result<()> {
        for (i, item) in self.iter().enumerate() {
            item.validate().map_err(|e| e.within(&format!("[{i}]")))?;
        }
        Ok(())
    }
}

impl<T: Validate> Validate for Option<T> {
    fn validate(&self) -> Result<()> {
        self.as_ref().map_or(Ok(()), Validate::validate)
    }
}

/// Longest object name EMCO accepts.
pub const NAME_MAX: usize = 128;
/// Longest `metadata.description`.
pub const DESCRIPTION_MAX: usize = 1024;
/// Longest `metadata.userData1` / `userData2`.
pub const USER_DATA_MAX: usize = 512;

/// Checks an object name: 1..=128 characters matching
/// `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`, EMCO's rule for every `metadata.name`.
///
/// # Errors
/// InvalidArgument with `field` as the path.
pub fn check_name(field: &str, name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid("name is required").with_field(field));
    }
    if name.chars().count() > NAME_MAX {
        return Err(
            Error::invalid(format!("name is longer than {NAME_MAX} characters")).with_field(field),
        );
    }
    let bytes = name.as_bytes();
    let edge_ok = |b: u8| b.is_ascii_alphanumeric();
    let inner_ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    let valid =
        edge_ok(bytes[0]) && edge_ok(bytes[bytes.len() - 1]) && bytes.iter().all(|&b| inner_ok(b));
    if valid {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "invalid name {name:?}: use letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
        ))
        .with_field(field))
    }
}

/// Checks that `value` has at most `max` characters.
///
/// # Errors
/// InvalidArgument with `field` as the path.
pub fn check_max_len(field: &str, value: &str, max: usize) -> Result<()> {
    if value.chars().count() > max {
        return Err(Error::invalid(format!("longer than {max} characters")).with_field(field));
    }
    Ok(())
}

/// Checks that a required string is present (not empty).
///
/// # Errors
/// InvalidArgument with `field` as the path.
pub fn check_required(field: &str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::invalid("is required").with_field(field));
    }
    Ok(())
}

/// Checks that `value` lies in `min..=max`.
///
/// # Errors
/// InvalidArgument with `field` as the path.
pub fn check_range<T>(field: &str, value: T, min: T, max: T) -> Result<()>
where
    T: PartialOrd + std::fmt::Display + Copy,
{
    if value < min || value > max {
        return Err(
            Error::invalid(format!("{value} is out of range {min}..={max}")).with_field(field),
        );
    }
    Ok(())
}

/// Checks that `value` is one of `allowed`.
///
/// # Errors
/// InvalidArgument with `field` as the path, listing the allowed values.
pub fn check_one_of(field: &str, value: &str, allowed: &[&str]) -> Result<()> {
    if allowed.contains(&value) {
        return Ok(());
    }
    Err(Error::invalid(format!("{value:?} is not one of {}", allowed.join(", "))).with_field(field))
}

/// The text of Kubernetes' label-value regex error (apimachinery `RegexError`, with its two
/// spaces before each `or`).
const LABEL_VALUE_REGEX_ERROR: &str = "a valid label must be an empty string or consist of \
    alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric \
    character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is \
    '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// Kubernetes' `IsValidLabelValue`: the problems of `value` (an empty value is valid).
#[must_use]
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_owned());
    }
    let bytes = value.as_bytes();
    let edge = |b: u8| b.is_ascii_alphanumeric();
    let inner = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    let valid = bytes.is_empty()
        || (edge(bytes[0]) && edge(bytes[bytes.len() - 1]) && bytes.iter().all(|&b| inner(b)));
    if !valid {
        errs.push(LABEL_VALUE_REGEX_ERROR.to_owned());
    }
    errs
}

/// EMCO's `validation.IsValidName`: a label value that is not empty, its problems in
/// Kubernetes' words.
#[must_use]
pub fn go_name_errors(name: &str) -> Vec<String> {
    let mut errs = label_value_errors(name);
    if name.is_empty() {
        errs.push("name must have non-zero length".to_owned());
    }
    errs
}

/// Whether `s` matches Kubernetes' DNS-1123 label regex `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
#[must_use]
pub fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty() && edge(b[0]) && edge(b[b.len() - 1]) && b.iter().all(|&c| edge(c) || c == b'-')
}

/// Kubernetes' `IsDNS1123Label`: the problems of `s`.
#[must_use]
pub fn dns1123_label_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_owned());
    }
    if !is_dns1123_label(s) {
        errs.push(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or \
             '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or \
             '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
                .to_owned(),
        );
    }
    errs
}

/// Kubernetes' `IsDNS1123Subdomain`: the problems of `s`.
#[must_use]
pub fn dns1123_subdomain_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push("must be no more than 253 characters".to_owned());
    }
    if !s.split('.').all(is_dns1123_label) {
        errs.push(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
             '-' or '.', and must start and end with an alphanumeric character (e.g. \
             'example.com', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                .to_owned(),
        );
    }
    errs
}

/// EMCO's `validation.IsValidLabel` for `value`, `name=value` or `prefix/name=value` (node
/// labels): its list of problems, each check's heading followed by Kubernetes' texts.
#[must_use]
pub fn go_label_errors(label: &str) -> Vec<String> {
    fn section(errs: &mut Vec<String>, heading: String, found: Vec<String>) {
        if !found.is_empty() {
            errs.push(heading);
            errs.extend(found);
        }
    }
    let mut errs = Vec::new();
    let (prefix, name, value, expect_name, expect_prefix) = match label.split_once('=') {
        None => ("", "", label, false, false),
        Some((key, value)) => match key.split_once('/') {
            None => ("", key, value, true, false),
            Some((prefix, name)) => (prefix, name, value, true, true),
        },
    };
    if !prefix.is_empty() {
        let heading =
            format!("Invalid label prefix - label=[{label}%], labelprefix=[{prefix}], errors: ");
        section(&mut errs, heading, dns1123_subdomain_errors(prefix));
    } else if expect_prefix {
        errs.push(format!(
            "Invalid label prefix - label=[{label}%], labelprefix=[{prefix}]"
        ));
    }
    if expect_name {
        let heading =
            format!("Invalid label name - label=[{label}%], labelname=[{name}], errors: ");
        section(&mut errs, heading, dns1123_label_errors(name));
    }
    if value.is_empty() {
        errs.push(format!(
            "Invalid label value - label=[{label}%], labelvalue=[{value}]"
        ));
    } else {
        let heading =
            format!("Invalid label value - label=[{label}%], labelvalue=[{value}], errors: ");
        section(&mut errs, heading, label_value_errors(value));
    }
    errs
}

/// Go's `fmt` `%v` of a `[]string`: `[a b c]`.
#[must_use]
pub fn go_list(items: &[String]) -> String {
    format!("[{}]", items.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn names() {
        for ok in ["a", "a1", "A-b_c.d9", "0", &"x".repeat(128)] {
            assert!(check_name("name", ok).is_ok(), "{ok}");
        }
        for bad in ["", "-a", "a-", "a b", "a/b", "_a", "é", &"x".repeat(129)] {
            let e = check_name("metadata.name", bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
            assert_eq!(e.field(), Some("metadata.name"), "{bad}");
        }
    }

    #[test]
    fn ranges_and_sets() {
        assert!(check_range("wait", 0, 0, 4096).is_ok());
        assert!(check_range("wait", 4096, 0, 4096).is_ok());
        assert!(check_range("wait", 4097, 0, 4096).is_err());
        assert!(check_one_of("opStatus", "Ready", &["Ready", "Deployed"]).is_ok());
        let e = check_one_of("opStatus", "Up", &["Ready", "Deployed"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "opStatus: \"Up\" is not one of Ready, Deployed"
        );
    }

    #[test]
    fn vec_paths() {
        struct V(bool);
        impl Validate for V {
            fn validate(&self) -> Result<()> {
                if self.0 {
                    Ok(())
                } else {
                    Err(Error::invalid("bad").with_field("x"))
                }
            }
        }
        let e = vec![V(true), V(false)]
            .validate()
            .unwrap_err()
            .within("items");
        assert_eq!(e.field(), Some("items[1].x"));
    }
}
