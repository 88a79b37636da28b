//! `Accept` negotiation for objects that carry a file (apps, app profiles, clusters).

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use emco_core::Error;
use emco_store::{BlobStream, ResourceKey, ResourceStore};
use futures::StreamExt;
use http::{HeaderMap, StatusCode, header};
use serde::Serialize;

use crate::{ApiError, json_response};

/// What a GET of an object with a file answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Representation {
    /// `application/json` (also `*/*` or no `Accept`): the object's JSON only.
    Json,
    /// `multipart/form-data`: a `metadata` part with the JSON and a `file` part.
    Multipart,
    /// `application/octet-stream`: the raw file.
    OctetStream,
}

impl Representation {
    /// The first media type of the `Accept` header that EMCO serves, in the client's order.
    ///
    /// # Errors
    /// 406 when the header names none of them.
    pub fn from_headers(headers: &HeaderMap) -> Result<Self, ApiError> {
        let Some(accept) = headers.get(header::ACCEPT) else {
            return Ok(Self::Json);
        };
        let accept = accept.to_str().unwrap_or_default();
        if accept.trim().is_empty() {
            return Ok(Self::Json);
        }
        for media in accept.split(',') {
            let media = media
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase();
            match media.as_str() {
                "application/json" | "*/*" | "application/*" => return Ok(Self::Json),
                "multipart/form-data" | "multipart/*" => return Ok(Self::Multipart),
                "application/octet-stream" => return Ok(Self::OctetStream),
                _ => {}
            }
        }
        Err(ApiError::with_status(
            StatusCode::NOT_ACCEPTABLE,
            format!(
                "cannot answer with {accept:?}: use application/json, multipart/form-data or application/octet-stream"
            ),
        ))
    }

    /// Answers with `object` and, as negotiated, the blob `blob` of `key` (streamed).
    ///
    /// # Errors
    /// NotFound when a file is asked for and the object has none.
    pub async fn respond<V: Serialize>(
        self,
        object: &V,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        blob: &str,
        file_name: &str,
    ) -> Result<Response, ApiError> {
        match self {
            Self::Json => Ok(json_response(StatusCode::OK, object)),
            Self::OctetStream => {
                let data = store.get_blob(key, blob).await?;
                Ok((
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, "application/octet-stream")],
                    Body::from_stream(data),
                )
                    .into_response())
            }
            Self::Multipart => {
                let data = store.get_blob(key, blob).await?;
                multipart_response(object, vec![FilePart::new("file", file_name, data)])
            }
        }
    }
}

/// One file part of a [`multipart_response`].
pub struct FilePart {
    field: String,
    file_name: String,
    data: BlobStream,
}

impl std::fmt::Debug for FilePart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilePart")
            .field("field", &self.field)
            .field("file_name", &self.file_name)
            .finish_non_exhaustive()
    }
}

impl FilePart {
    /// The part `field` (`file`, `files`) holding `data` as the file `file_name`.
    #[must_use]
    pub fn new(field: impl Into<String>, file_name: impl Into<String>, data: BlobStream) -> Self {
        Self {
            field: field.into(),
            file_name: file_name.into(),
            data,
        }
    }
}

/// A 200 `multipart/form-data` answer: a `metadata` part with `object`'s JSON, then `files`
/// in order, streamed (EMCO's GET of objects that carry files).
///
/// # Errors
/// Internal when `object` cannot be serialized.
pub fn multipart_response<V: Serialize>(
    object: &V,
    files: Vec<FilePart>,
) -> Result<Response, ApiError> {
    let metadata = serde_json::to_vec(object)
        .map_err(|e| Error::internal("cannot serialize the answer").with_source(e))?;
    let boundary = format!("emco-{:032x}", rand::random::<u128>());
    let head = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"metadata\"\r\nContent-Type: application/json\r\n\r\n"
    );
    let mut body: BlobStream = Box::pin(futures::stream::iter([
        Ok(Bytes::from(head)),
        Ok(Bytes::from(metadata)),
    ]));
    let clean = |s: &str| s.replace(['"', '\r', '\n'], "_");
    for part in files {
        let part_head = format!(
            "\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"{}\"; filename=\"{}\"\r\nContent-Type: application/octet-stream\r\n\r\n",
            clean(&part.field),
            clean(&part.file_name)
        );
        body = Box::pin(
            body.chain(futures::stream::iter([Ok(Bytes::from(part_head))]))
                .chain(part.data),
        );
    }
    let tail = format!("\r\n--{boundary}--\r\n");
    let body = body.chain(futures::stream::iter([Ok(Bytes::from(tail))]));
    Ok((
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            format!("multipart/form-data; boundary={boundary}"),
        )],
        Body::from_stream(body),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(accept: &str) -> Result<Representation, ApiError> {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, accept.parse().unwrap());
        Representation::from_headers(&h)
    }

    #[test]
    fn negotiates_in_client_order() {
        assert_eq!(
            Representation::from_headers(&HeaderMap::new()).unwrap(),
            Representation::Json
        );
        assert_eq!(
            with("application/octet-stream").unwrap(),
            Representation::OctetStream
        );
        assert_eq!(
            with("text/html, multipart/form-data;q=0.9").unwrap(),
            Representation::Multipart
        );
        assert_eq!(with("*/*").unwrap(), Representation::Json);
        assert_eq!(
            with("text/html").unwrap_err().status(),
            StatusCode::NOT_ACCEPTABLE
        );
    }
}
