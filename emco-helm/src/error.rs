//! Errors of template parsing and execution.

use emco_core::{ErrorKind, HasKind};

/// A template failed to parse or to execute. The message follows Go's `text/template` wording,
/// starting with `template: NAME:LINE:COL:` so that the file and line of the failure are named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TemplateError {
    message: String,
    kind: ErrorKind,
}

impl TemplateError {
    /// An error caused by the template or its data (the usual case).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            kind: ErrorKind::InvalidArgument,
        }
    }

    /// The full message.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl HasKind for TemplateError {
    fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl From<TemplateError> for emco_core::Error {
    fn from(err: TemplateError) -> Self {
        emco_core::Error::new(err.kind, err.message)
    }
}
