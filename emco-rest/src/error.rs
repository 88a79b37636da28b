//! The one error type of the REST edge.

use axum::response::{IntoResponse, Response};
use emco_core::error::chain;
use emco_core::{Error, ErrorKind};
use http::{StatusCode, header};

/// The header naming the [`ErrorKind`] of an error answer (`NotFound`, `AlreadyExists`,
/// `Conflict`, ...): EMCO's status codes put several kinds on 409.
pub const ERROR_KIND_HEADER: &str = "x-emco-error-kind";

/// An error as a REST answer: EMCO's status code, a short plain-text message, and the error kind
/// in [`ERROR_KIND_HEADER`].
///
/// Kinds map as EMCO answers: InvalidArgument 400, NotFound 404, AlreadyExists and Conflict
/// 409, FailedPrecondition (an operation in the wrong lifecycle state) 409, Unavailable 503,
/// Internal 500. A 500's body is generic and a 503's is the error's own message; the full cause
/// chain goes to the log.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    error: Error,
}

impl ApiError {
    /// An error with an explicit status (e.g. 422 for malformed JSON, 413 for a body too large).
    pub fn with_status(status: StatusCode, message: impl Into<String>) -> Self {
        let kind = if status.is_server_error() {
            ErrorKind::Internal
        } else {
            ErrorKind::InvalidArgument
        };
        Self {
            status,
            error: Error::new(kind, message),
        }
    }

    /// The status this error answers with.
    #[must_use]
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The underlying error.
    #[must_use]
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// The HTTP status of an error kind.
    #[must_use]
    pub fn status_of(kind: ErrorKind) -> StatusCode {
        StatusCode::from_u16(kind.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        Self {
            status: Self::status_of(error.kind()),
            error,
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.status, self.error)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let message = if self.status == StatusCode::SERVICE_UNAVAILABLE {
            // Says what is unavailable (a controller, a store) so the caller knows what to fix;
            // the cause chain with its addresses and transport details stays in the log.
            tracing::warn!(status = %self.status, error = %chain(&self.error), "request failed");
            self.error.to_string()
        } else if self.status.is_server_error() {
            tracing::error!(status = %self.status, error = %chain(&self.error), "request failed");
            "internal server error".to_owned()
        } else {
            tracing::debug!(status = %self.status, error = %chain(&self.error), "request refused");
            self.error.to_string()
        };
        // EMCO answers errors with Go's http.Error: plain text ending in a newline.
        (
            self.status,
            [
                (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                // EMCO's codes put several kinds on 409; clients that care read the kind here.
                (
                    header::HeaderName::from_static(ERROR_KIND_HEADER),
                    self.error.kind().as_str(),
                ),
            ],
            format!("{message}\n"),
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_emco_statuses() {
        let cases = [
            (Error::invalid("x"), 400),
            (Error::not_found("x"), 404),
            (Error::already_exists("x"), 409),
            (Error::conflict("x"), 409),
            (Error::failed_precondition("x"), 409),
            (Error::unavailable("x"), 503),
            (Error::internal("x"), 500),
        ];
        for (e, code) in cases {
            let kind = e.kind();
            let answer = ApiError::from(e).into_response();
            assert_eq!(answer.status().as_u16(), code);
            assert_eq!(answer.headers()[ERROR_KIND_HEADER], kind.as_str());
        }
    }

    #[tokio::test]
    async fn internal_errors_hide_detail() {
        let resp = ApiError::from(Error::internal("secret path /etc")).into_response();
        let body = axum::body::to_bytes(resp.into_body(), 1024).await.unwrap();
        assert_eq!(&body[..], b"internal server error\n");
        let resp =
            ApiError::from(Error::invalid("bad").with_field("metadata.name")).into_response();
        assert_eq!(
            resp.headers()[header::CONTENT_TYPE],
            "text/plain; charset=utf-8"
        );
        let body = axum::body::to_bytes(resp.into_body(), 1024).await.unwrap();
        assert_eq!(&body[..], b"metadata.name: bad\n");
    }
}
