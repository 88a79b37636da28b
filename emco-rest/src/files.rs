//! The one upload path of objects whose POST and PUT are multipart: the object's JSON in
//! `metadata`, its files in `file` / `files` parts, kept as blobs of the object. The
//! orchestrator's apps, app profiles and clusters and the controllers' file intents (gac's
//! resources and customizations) are all served by [`FileRoutes`]; what differs per type is how a
//! form is written ([`FormWriter`]) and the name a file is downloaded as.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use axum::Router;
use axum::extract::multipart::MultipartRejection;
use axum::extract::{Multipart, Path};
use axum::routing::get;
use emco_appcontext::collection::{Collection, Object};
use emco_appcontext::keys::FILE_BLOB;
use emco_core::{Error, Found, Result};
use emco_store::{BlobStream, ResourceKey, ResourceStore};
use http::{HeaderMap, StatusCode};

use crate::accept::{FilePart, multipart_response};
use crate::multipart::{MultipartForm, UploadedFile};
use crate::routes::item_key;
use crate::{ApiError, KeyPattern, Representation, json_response, list_response, put_status};

/// The blob name of an uploaded part, by the rule of [`FILE_BLOB`].
///
/// # Errors
/// `InvalidArgument` for a `files` part without a usable file name.
fn blob_name(file: &UploadedFile) -> Result<String> {
    if file.field == "file" {
        return Ok(FILE_BLOB.to_owned());
    }
    let name = file
        .file_name
        .as_deref()
        .and_then(|n| n.rsplit(['/', '\\']).next())
        .unwrap_or("");
    if name.is_empty() || name == FILE_BLOB {
        return Err(Error::invalid(format!(
            "every `files` part needs a file name other than {FILE_BLOB:?}"
        )));
    }
    Ok(name.to_owned())
}

/// The blob `name` of `key`, `None` when it was never uploaded.
async fn blob_if_any(
    store: &dyn ResourceStore,
    key: &ResourceKey,
    name: &str,
) -> Result<Option<BlobStream>> {
    store.get_blob(key, name).await.found()
}

/// How a multipart create or PUT of one object type is written.
#[async_trait]
pub trait FormWriter<T>: Send + Sync + 'static {
    /// Creates `value` under `parent` (`url_name` is `None`) or creates or replaces the object
    /// the URL names, with the form's files; returns whether the object was created.
    ///
    /// # Errors
    /// What the answer should be: the collection's errors, a missing file, a bad file.
    async fn write(
        &self,
        collection: &Collection<T>,
        parent: &ResourceKey,
        url_name: Option<&str>,
        value: &T,
        form: &MultipartForm,
    ) -> std::result::Result<bool, ApiError>;
}

/// The writer of file intents: the object through its collection, then the `file` part as the
/// blob [`FILE_BLOB`] and each `files` part as a blob under its file name.
#[derive(Debug, Clone, Copy, Default)]
pub struct BlobFiles;

#[async_trait]
impl<T: Object> FormWriter<T> for BlobFiles {
    async fn write(
        &self,
        collection: &Collection<T>,
        parent: &ResourceKey,
        url_name: Option<&str>,
        value: &T,
        form: &MultipartForm,
    ) -> std::result::Result<bool, ApiError> {
        let names = form
            .files()
            .iter()
            .map(blob_name)
            .collect::<Result<Vec<_>>>()?;
        let created = match url_name {
            None => {
                collection.create(parent, value).await?;
                true
            }
            Some(name) => collection.put(parent, name, value).await?,
        };
        let key = collection.key(parent, value.name());
        for (file, name) in form.files().iter().zip(names) {
            collection
                .store()
                .put_blob(&key, &name, file.blob_stream().await?)
                .await?;
        }
        Ok(created)
    }
}

/// The five routes of an object type whose POST and PUT are multipart forms, over its
/// collection: POST and PUT read the form (400 when it is not one, 413 past the file limit),
/// parse `metadata` as the object and hand both to the type's [`FormWriter`]; GET of an item
/// negotiates with `Accept` (the object's JSON; `application/octet-stream`, the `file` alone;
/// `multipart/form-data`, a `metadata` part, the `file` part when there is one and a `files`
/// part for each extra file that was uploaded); list and delete are the collection's.
pub struct FileRoutes<T> {
    collection_path: String,
    item_param: String,
    collection: Collection<T>,
    writer: Arc<dyn FormWriter<T>>,
    max_file: u64,
    download_name: fn(&str) -> String,
    extra_files: fn(&T) -> Vec<String>,
    list: bool,
}

impl<T> std::fmt::Debug for FileRoutes<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileRoutes")
            .field("collection_path", &self.collection_path)
            .field("item_param", &self.item_param)
            .field("max_file", &self.max_file)
            .finish_non_exhaustive()
    }
}

impl<T: Object> FileRoutes<T> {
    /// The routes of `collection` at `collection_path`, items at `{collection_path}/{item_param}`;
    /// forms written by [`BlobFiles`], files up to 64 MiB, downloaded under the object's name.
    pub fn new(
        collection_path: impl Into<String>,
        item_param: impl Into<String>,
        collection: Collection<T>,
    ) -> Self {
        Self {
            collection_path: collection_path.into(),
            item_param: item_param.into(),
            collection,
            writer: Arc::new(BlobFiles),
            max_file: 64 * 1024 * 1024,
            download_name: str::to_owned,
            extra_files: |_| Vec::new(),
            list: true,
        }
    }

    /// Writes forms with `writer`.
    #[must_use]
    pub fn writer(mut self, writer: impl FormWriter<T>) -> Self {
        self.writer = Arc::new(writer);
        self
    }

    /// Refuses a file part larger than `max_file` bytes with 413.
    #[must_use]
    pub fn max_file(mut self, max_file: u64) -> Self {
        self.max_file = max_file;
        self
    }

    /// The file name the `file` part is downloaded as, from the object's name.
    #[must_use]
    pub fn download_name(mut self, name: fn(&str) -> String) -> Self {
        self.download_name = name;
        self
    }

    /// The names of an object's `files` blobs, sent as `files` parts of a multipart GET.
    #[must_use]
    pub fn extra_files(mut self, files: fn(&T) -> Vec<String>) -> Self {
        self.extra_files = files;
        self
    }

    /// Leaves `GET collection` to the caller (a list with queries of its own).
    #[must_use]
    pub fn without_list(mut self) -> Self {
        self.list = false;
        self
    }

    /// The routes.
    pub fn serve<S: Clone + Send + Sync + 'static>(self) -> Router<S> {
        let item_path = format!("{}/{{{}}}", self.collection_path, self.item_param);
        let parent = Arc::new(KeyPattern::parse(&self.collection_path));
        let item_param: Arc<str> = Arc::from(self.item_param.as_str());
        let collection = Arc::new(self.collection);
        let writer = self.writer;
        let max_file = self.max_file;
        let (download_name, extra_files) = (self.download_name, self.extra_files);

        let (c, p, w) = (
            Arc::clone(&collection),
            Arc::clone(&parent),
            Arc::clone(&writer),
        );
        let create =
            move |Path(params): Path<HashMap<String, String>>,
                  form: std::result::Result<Multipart, MultipartRejection>| async move {
                let parent = p.key(&params)?;
                let form = read_form(form, max_file).await?;
                let value: T = form.metadata()?;
                w.write(&c, &parent, None, &value, &form).await?;
                Ok::<_, ApiError>(json_response(StatusCode::CREATED, &value))
            };
        let (c, p, n) = (
            Arc::clone(&collection),
            Arc::clone(&parent),
            Arc::clone(&item_param),
        );
        let put_item =
            move |Path(params): Path<HashMap<String, String>>,
                  form: std::result::Result<Multipart, MultipartRejection>| async move {
                let (parent, name) = item_key(&p, &n, &params)?;
                let form = read_form(form, max_file).await?;
                let value: T = form.metadata()?;
                let created = writer
                    .write(&c, &parent, Some(&name), &value, &form)
                    .await?;
                Ok::<_, ApiError>(json_response(put_status(c.wording(), created), &value))
            };
        let (c, p, n) = (
            Arc::clone(&collection),
            Arc::clone(&parent),
            Arc::clone(&item_param),
        );
        let get_item = move |Path(params): Path<HashMap<String, String>>, headers: HeaderMap| async move {
            let rep = Representation::from_headers(&headers)?;
            let (parent, name) = item_key(&p, &n, &params)?;
            let value = c.get(&parent, &name).await?;
            let key = c.key(&parent, &name);
            let store = c.store().as_ref();
            let file_name = download_name(&name);
            if rep != Representation::Multipart {
                return rep
                    .respond(&value, store, &key, FILE_BLOB, &file_name)
                    .await;
            }
            let mut parts = Vec::new();
            if let Some(data) = blob_if_any(store, &key, FILE_BLOB).await? {
                parts.push(FilePart::new("file", file_name, data));
            }
            for file in extra_files(&value) {
                if let Some(data) = blob_if_any(store, &key, &file).await? {
                    parts.push(FilePart::new("files", file, data));
                }
            }
            multipart_response(&value, parts)
        };
        let (c, p, n) = (Arc::clone(&collection), Arc::clone(&parent), item_param);
        let delete_item = move |Path(params): Path<HashMap<String, String>>| async move {
            let (parent, name) = item_key(&p, &n, &params)?;
            c.delete(&parent, &name).await?;
            Ok::<_, ApiError>(StatusCode::NO_CONTENT)
        };
        let mut collection_routes = axum::routing::post(create);
        if self.list {
            let list = move |Path(params): Path<HashMap<String, String>>| async move {
                let items = collection.list(&parent.key(&params)?, &[]).await?;
                list_response(collection.wording(), &items)
            };
            collection_routes = collection_routes.get(list);
        }
        Router::new()
            .route(&self.collection_path, collection_routes)
            .route(&item_path, get(get_item).put(put_item).delete(delete_item))
    }
}

/// A multipart body, or EMCO's 400 when the request is not one.
///
/// # Errors
/// 400 for a body that is not a form; the limits of [`MultipartForm::read`].
pub async fn read_form(
    form: std::result::Result<Multipart, MultipartRejection>,
    max_file: u64,
) -> std::result::Result<MultipartForm, ApiError> {
    let form = form.map_err(|r| ApiError::with_status(StatusCode::BAD_REQUEST, r.body_text()))?;
    MultipartForm::read(form, max_file).await
}
