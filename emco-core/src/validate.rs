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
