//! Typed identities: what the stores and records keep as text, parsed once.

use std::fmt;
use std::str::FromStr;

use crate::{Error, Result};

/// The id of an AppContext. Records and keys keep it as decimal text (`"1234"`, EMCO's
/// `/context/1234/`); parse it with [`str::parse`] or [`ContextId::from_record`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContextId(u64);

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
}
