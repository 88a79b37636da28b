//! The JSON body extractor with EMCO's error statuses.

use axum::extract::{FromRequest, Request};
use bytes::Bytes;
use emco_core::{Error, Validate};
use http::StatusCode;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::ApiError;

/// A JSON request body, parsed with Go's `encoding/json` rules (`null` for any field reads as
/// its zero value, field names match case-insensitively; see [`emco_go::json`]) and validated:
/// an empty body is a 400, a body that is not JSON or has wrong types is a 422, a body its
/// type's EMCO schema refuses ([`Validate::schema`]) a 400 with EMCO's `Invalid Input:` text,
/// and a [`Validate`] failure a 400 naming the field path. A body over the router's limit is a
/// 413.
#[derive(Debug, Clone)]
pub struct EmcoJson<T>(pub T);

impl<T: DeserializeOwned + Serialize + Validate> EmcoJson<T> {
    /// Parses and validates `body` as the extractor does.
    ///
    /// # Errors
    /// 400 for an empty body or a schema violation, 422 for malformed JSON.
    pub fn parse(body: &[u8]) -> Result<T, ApiError> {
        Self::parse_checked(body, true)
    }

    /// [`Self::parse`] for a PUT: the schema is checked only where EMCO's PUT handler checks it
    /// ([`Validate::schema_on_put`]).
    ///
    /// # Errors
    /// As [`Self::parse`].
    pub fn parse_put(body: &[u8]) -> Result<T, ApiError> {
        Self::parse_checked(body, T::schema_on_put())
    }

    fn parse_checked(body: &[u8], schema: bool) -> Result<T, ApiError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            // EMCO's handlers: `io.EOF` from the decoder answers this text.
            return Err(Error::invalid(T::empty_body_message()).into());
        }
        let value: T = emco_go::json::from_slice(body).map_err(|e| {
            ApiError::with_status(
                StatusCode::UNPROCESSABLE_ENTITY,
                T::undecodable_message(&e.to_string()),
            )
        })?;
        if T::checks_before_schema() {
            value.validate()?;
        }
        if let Some(schema) = T::schema().filter(|_| schema) {
            // As EMCO: the body as the Go struct writes it back, not as it was sent.
            let doc = serde_json::to_value(&value)
                .map_err(|e| Error::internal("cannot re-encode a body").with_source(e))?;
            if let Some(text) = schema.invalid_input(&doc) {
                return Err(Error::invalid(T::schema_message(text)).into());
            }
        }
        if !T::checks_before_schema() {
            value.validate()?;
        }
        Ok(value)
    }
}

/// A request body as bytes, for handlers that check something before reading it; a body over
/// the router's limit is a 413.
#[derive(Debug, Clone)]
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        Bytes::from_request(req, state)
            .await
            .map(RawBody)
            .map_err(|rej| ApiError::with_status(rej.status(), rej.body_text()))
    }
}

impl<T, S> FromRequest<S> for EmcoJson<T>
where
    T: DeserializeOwned + Serialize + Validate,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let RawBody(body) = RawBody::from_request(req, state).await?;
        Self::parse(&body).map(EmcoJson)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use emco_core::model::Project;

    #[test]
    fn statuses_follow_emco() {
        let status = |b: &str| {
            EmcoJson::<Project>::parse(b.as_bytes())
                .unwrap_err()
                .status()
        };
        assert_eq!(status(""), StatusCode::BAD_REQUEST);
        assert_eq!(status("{"), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            status(r#"{"metadata":{"name":5}}"#),
            StatusCode::UNPROCESSABLE_ENTITY
        );
        // The project's schema (EMCO's metadata.json), in gojsonschema's words.
        let err = EmcoJson::<Project>::parse(br#"{"metadata":{"name":"-x"}}"#).unwrap_err();
        assert_eq!(err.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            err.error().message(),
            "Invalid Input:\nDoes not match pattern '^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'"
        );
        assert!(EmcoJson::<Project>::parse(br#"{"metadata":{"name":"p1"}}"#).is_ok());
        // Go's encoding/json reads null as the zero value and matches names case-insensitively.
        let p = EmcoJson::<Project>::parse(
            br#"{"Metadata":{"name":"p1","description":null,"userData1":null}}"#,
        )
        .unwrap();
        assert_eq!(p.metadata.name, "p1");
        assert!(p.metadata.description.is_empty());
    }
}
