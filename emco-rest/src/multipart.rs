//! EMCO's multipart uploads: a `metadata` field (JSON text) plus `file` (or `files`) parts.
//!
//! File parts are spooled to temporary files as they arrive, never held whole in memory, with a
//! size limit per file; the form's parts may come in any order, so the metadata (which names
//! the object) is only known once the whole form is read. The spooled files are then streamed
//! into the resource store's blob API with [`UploadedFile::blob_stream`] and removed on drop.

use std::path::Path;

use axum::extract::Multipart;
use bytes::Bytes;
use emco_core::{Error, Validate};
use emco_store::{BlobStream, file_blob_stream};
use http::StatusCode;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::AsyncWriteExt;

use crate::{ApiError, EmcoJson};

/// The largest `metadata` field accepted.
pub const METADATA_MAX: usize = 1024 * 1024;

/// A file part of a form, spooled to a temporary file.
#[derive(Debug)]
pub struct UploadedFile {
    /// The form field (`file`, `files`).
    pub field: String,
    /// The client's file name, if it sent one.
    pub file_name: Option<String>,
    /// The size in bytes.
    pub size: u64,
    path: tempfile::TempPath,
}

impl UploadedFile {
    /// Where the spooled content is.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The content as a blob stream for [`emco_store::ResourceStore::put_blob`].
    ///
    /// # Errors
    /// Internal when the spooled file cannot be opened.
    pub async fn blob_stream(&self) -> Result<BlobStream, Error> {
        file_blob_stream(&self.path).await
    }
}

/// A read multipart form.
#[derive(Debug, Default)]
pub struct MultipartForm {
    metadata: Option<Bytes>,
    files: Vec<UploadedFile>,
}

fn rejected(e: &axum::extract::multipart::MultipartError) -> ApiError {
    ApiError::with_status(e.status(), e.body_text())
}

impl MultipartForm {
    /// Reads every part of `form`: `metadata` into memory (at most [`METADATA_MAX`]), `file` and
    /// `files` parts to temporary files of at most `max_file` bytes each (413 beyond). Other
    /// fields are read and ignored.
    ///
    /// # Errors
    /// 400 for a malformed form, 413 for a part over its limit, 500 when spooling fails.
    pub async fn read(mut form: Multipart, max_file: u64) -> Result<Self, ApiError> {
        let mut out = Self::default();
        while let Some(mut field) = form.next_field().await.map_err(|e| rejected(&e))? {
            let name = field.name().unwrap_or_default().to_owned();
            match name.as_str() {
                "metadata" => {
                    let mut buf = Vec::new();
                    while let Some(chunk) = field.chunk().await.map_err(|e| rejected(&e))? {
                        if buf.len() + chunk.len() > METADATA_MAX {
                            return Err(ApiError::with_status(
                                StatusCode::PAYLOAD_TOO_LARGE,
                                format!("the metadata field is larger than {METADATA_MAX} bytes"),
                            ));
                        }
                        buf.extend_from_slice(&chunk);
                    }
                    out.metadata = Some(Bytes::from(buf));
                }
                "file" | "files" => {
                    let file_name = field.file_name().map(str::to_owned);
                    let spool = tempfile::NamedTempFile::new()
                        .map_err(|e| Error::internal("cannot spool an upload").with_source(e))?;
                    let (file, path) = spool.into_parts();
                    let mut file = tokio::fs::File::from_std(file);
                    let mut size: u64 = 0;
                    while let Some(chunk) = field.chunk().await.map_err(|e| rejected(&e))? {
                        size += chunk.len() as u64;
                        if size > max_file {
                            return Err(ApiError::with_status(
                                StatusCode::PAYLOAD_TOO_LARGE,
                                format!("the uploaded file is larger than {max_file} bytes"),
                            ));
                        }
                        file.write_all(&chunk).await.map_err(|e| {
                            Error::internal("cannot spool an upload").with_source(e)
                        })?;
                    }
                    file.flush()
                        .await
                        .map_err(|e| Error::internal("cannot spool an upload").with_source(e))?;
                    out.files.push(UploadedFile {
                        field: name,
                        file_name,
                        size,
                        path,
                    });
                }
                _ => while field.chunk().await.map_err(|e| rejected(&e))?.is_some() {},
            }
        }
        Ok(out)
    }

    /// The `metadata` field parsed and validated as [`EmcoJson`] does.
    ///
    /// # Errors
    /// 400 when the field is missing or invalid, 422 when it is not JSON of the right shape.
    pub fn metadata<T: DeserializeOwned + Serialize + Validate>(&self) -> Result<T, ApiError> {
        match &self.metadata {
            Some(m) => EmcoJson::<T>::parse(m),
            None => Err(Error::invalid("the form has no metadata field").into()),
        }
    }

    /// The first file part, if any.
    #[must_use]
    pub fn file(&self) -> Option<&UploadedFile> {
        self.files.first()
    }

    /// Every file part, in form order.
    #[must_use]
    pub fn files(&self) -> &[UploadedFile] {
        &self.files
    }
}
