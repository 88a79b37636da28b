//! The error type shared by the whole workspace.
//!
//! Every library error of the workspace maps onto one [`ErrorKind`]; the REST edge maps the kind to
//! an HTTP status and the gRPC edge to a `tonic::Code`, each in one place.

use std::fmt;

/// What went wrong, independent of where. The set is closed on purpose: callers match on it to pick
/// a status code or a retry policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ErrorKind {
    /// The object, or a parent or reference it needs, does not exist.
    NotFound,
    /// An object with the same key exists already.
    AlreadyExists,
    /// The request contradicts the stored state (a stale revision, a parent that still has children).
    Conflict,
    /// The input is malformed or violates the schema.
    InvalidArgument,
    /// The input is well-formed but the object is not in a state that allows the operation.
    FailedPrecondition,
    /// A backend or peer cannot be reached right now; retrying may succeed.
    Unavailable,
    /// A bug or an unexpected condition; never caused by input alone.
    Internal,
    /// The caller gave no credentials, or ones that do not prove who it is.
    Unauthenticated,
    /// The caller is known but its roles do not allow the operation.
    PermissionDenied,
}

impl ErrorKind {
    /// Every kind.
    pub const ALL: [Self; 9] = [
        Self::NotFound,
        Self::AlreadyExists,
        Self::Conflict,
        Self::InvalidArgument,
        Self::FailedPrecondition,
        Self::Unavailable,
        Self::Internal,
        Self::Unauthenticated,
        Self::PermissionDenied,
    ];

    /// The kind named `name` (its [`ErrorKind::as_str`]).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The HTTP status an error of this kind answers with: EMCO's codes (it answers 409 for
    /// several kinds; the REST edge names the kind in a header).
    #[must_use]
    pub const fn http_status(self) -> u16 {
        match self {
            Self::InvalidArgument => 400,
            Self::Unauthenticated => 401,
            Self::PermissionDenied => 403,
            Self::NotFound => 404,
            Self::AlreadyExists | Self::Conflict | Self::FailedPrecondition => 409,
            Self::Internal => 500,
            Self::Unavailable => 503,
        }
    }

    /// A stable, human-readable name (`"NotFound"`, ...).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::NotFound => "NotFound",
            Self::AlreadyExists => "AlreadyExists",
            Self::Conflict => "Conflict",
            Self::InvalidArgument => "InvalidArgument",
            Self::FailedPrecondition => "FailedPrecondition",
            Self::Unavailable => "Unavailable",
            Self::Internal => "Internal",
            Self::Unauthenticated => "Unauthenticated",
            Self::PermissionDenied => "PermissionDenied",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Anything that can say which [`ErrorKind`] it is. Library error types of other crates implement
/// it so that the server edges need no knowledge of them.
pub trait HasKind {
    /// The kind of this error.
    fn kind(&self) -> ErrorKind;
}

type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Reads a [`ErrorKind::NotFound`] answer as absence:
/// `let Some(blob) = store.get_blob(key, name).await.found()? else { ... }`.
pub trait Found<T> {
    /// `Some` of a value, `None` for a `NotFound` error; any other error as it is.
    ///
    /// # Errors
    /// Every error but `NotFound`.
    fn found(self) -> Result<Option<T>>;
}

impl<T> Found<T> for Result<T> {
    fn found(self) -> Result<Option<T>> {
        match self {
            Ok(value) => Ok(Some(value)),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// An error with a kind, a message, the path of the offending field (for validation errors), and
/// the underlying cause, which is kept so that logs can print the whole chain.
#[derive(Debug, thiserror::Error)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    field: Option<String>,
    #[source]
    source: Option<BoxError>,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) if !field.is_empty() => write!(f, "{field}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

impl Error {
    /// A new error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            field: None,
            source: None,
        }
    }

    /// [`ErrorKind::NotFound`].
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// [`ErrorKind::AlreadyExists`].
    pub fn already_exists(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::AlreadyExists, message)
    }

    /// [`ErrorKind::Conflict`].
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, message)
    }

    /// [`ErrorKind::InvalidArgument`].
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArgument, message)
    }

    /// [`ErrorKind::FailedPrecondition`].
    pub fn failed_precondition(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::FailedPrecondition, message)
    }

    /// [`ErrorKind::Unavailable`].
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }

    /// [`ErrorKind::Internal`].
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    /// [`ErrorKind::Unauthenticated`].
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unauthenticated, message)
    }

    /// [`ErrorKind::PermissionDenied`].
    pub fn permission_denied(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::PermissionDenied, message)
    }

    /// Sets the path of the field the error is about (`spec.intent.allOf[0].cluster`).
    #[must_use]
    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// Prefixes the field path with `parent`, so nested validators can report paths relative to
    /// themselves and the caller adds where the nested value sits.
    #[must_use]
    pub fn within(mut self, parent: &str) -> Self {
        self.field = Some(match self.field.take() {
            Some(f) if f.starts_with('[') => format!("{parent}{f}"),
            Some(f) if !f.is_empty() => format!("{parent}.{f}"),
            _ => parent.to_owned(),
        });
        self
    }

    /// Keeps `source` as the cause of this error.
    #[must_use]
    pub fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// The kind of this error.
    #[must_use]
    pub const fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, without the field path.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The path of the offending field, if the error is about one.
    #[must_use]
    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }
}

impl HasKind for Error {
    fn kind(&self) -> ErrorKind {
        self.kind
    }
}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error and its causes on one line (`outer: cause: root cause`), for logs and for answers
/// that relay another system's failure.
#[must_use]
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut at = error.source();
    while let Some(e) = at {
        out.push_str(": ");
        out.push_str(&e.to_string());
        at = e.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_paths_nest() {
        let e = Error::invalid("must not be empty")
            .with_field("name")
            .within("metadata");
        assert_eq!(e.field(), Some("metadata.name"));
        assert_eq!(e.to_string(), "metadata.name: must not be empty");
        let e = Error::invalid("bad").with_field("[2]").within("spec.allOf");
        assert_eq!(e.field(), Some("spec.allOf[2]"));
        let e = Error::invalid("bad").within("spec");
        assert_eq!(e.to_string(), "spec: bad");
    }

    #[test]
    fn source_is_kept() {
        let io = std::io::Error::other("disk gone");
        let e = Error::unavailable("store down").with_source(io);
        let src = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(src.as_deref(), Some("disk gone"));
        assert_eq!(e.kind(), ErrorKind::Unavailable);
    }
}
