//! The routes of intent types whose POST and PUT are multipart: the object's JSON in `metadata`,
//! its files in `file` / `files` parts, stored as blobs of the object.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Multipart, Path};
use axum::routing::get;
use emco_appcontext::collection::Collection;
use emco_appcontext::keys::FILE_BLOB;
use emco_appcontext::{BlobStream, ResourceKey, ResourceStore};
use emco_core::{Error, ErrorKind, Result};
use http::{HeaderMap, StatusCode};

use super::accept::{FilePart, multipart_response};
use super::multipart::{MultipartForm, UploadedFile};
use super::{ApiError, KeyPattern, Representation, json_response, list_response, put_status};
use crate::intent::{IntentParent, IntentType};

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
    match store.get_blob(key, name).await {
        Ok(data) => Ok(Some(data)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Creates or replaces the object from a multipart form and stores its files as blobs.
async fn write_form<T: IntentType>(
    collection: &Collection<T>,
    parent: &ResourceKey,
    url_name: Option<&str>,
    form: &MultipartForm,
) -> std::result::Result<(StatusCode, T), ApiError> {
    let value: T = form.metadata()?;
    let names = form
        .files()
        .iter()
        .map(blob_name)
        .collect::<Result<Vec<_>>>()?;
    let status = match url_name {
        None => {
            collection.create(parent, &value).await?;
            StatusCode::CREATED
        }
        Some(name) => {
            let created = collection.put(parent, name, &value).await?;
            put_status(collection.wording(), created)
        }
    };
    let key = parent.child(T::PARAM, value.name());
    for (file, name) in form.files().iter().zip(names) {
        collection
            .store()
            .put_blob(&key, &name, file.blob_stream().await?)
            .await?;
    }
    Ok((status, value))
}

/// The five routes of an intent type whose POST and PUT are multipart (`metadata` + `file` /
/// `files`, EMCO's gac resources and customizations). Files go to blobs: `file` as
/// [`FILE_BLOB`], each `files` part under its file name; files over `max_file` bytes get 413.
/// GET of an item negotiates with `Accept`: the object's JSON; `multipart/form-data` with a
/// `metadata` part, the `file` part when there is one and a `files` part for each of
/// [`IntentType::file_names`] that was uploaded; `application/octet-stream` the `file` alone.
pub fn file_routes<T: IntentType, S: Clone + Send + Sync + 'static>(
    store: Arc<dyn ResourceStore>,
    max_file: u64,
) -> Router<S> {
    let collection_path = format!("/v2{}", T::collection_path());
    let item_path = format!("/v2{}", T::item_path());
    let parent = Arc::new(KeyPattern::parse(&collection_path));
    let item = Arc::new(KeyPattern::parse(&item_path));
    let collection = T::collection(store);

    let (c, p) = (collection.clone(), Arc::clone(&parent));
    let create = move |Path(params): Path<HashMap<String, String>>, form: Multipart| async move {
        let form = MultipartForm::read(form, max_file).await?;
        let (status, value) = write_form(&c, &p.key(&params)?, None, &form).await?;
        Ok::<_, ApiError>(json_response(status, &value))
    };
    let (c, p) = (collection.clone(), parent);
    let list = move |Path(params): Path<HashMap<String, String>>| async move {
        let items = c.list(&p.key(&params)?, &[]).await?;
        list_response(c.wording(), &items)
    };
    let split =
        |item: &KeyPattern, params: &HashMap<String, String>| -> Result<(ResourceKey, String)> {
            let key = item.key(params)?;
            match (key.parent(), key.name()) {
                (Some(parent), Some(name)) => Ok((parent, name.to_owned())),
                _ => Err(Error::invalid("the URL names no object")),
            }
        };
    let (c, i) = (collection.clone(), Arc::clone(&item));
    let get_item = move |Path(params): Path<HashMap<String, String>>, headers: HeaderMap| async move {
        let rep = Representation::from_headers(&headers)?;
        let (parent, name) = split(&i, &params)?;
        let value = c.get(&parent, &name).await?;
        let key = c.key(&parent, &name);
        let store = c.store().as_ref();
        if rep != Representation::Multipart {
            return rep.respond(&value, store, &key, FILE_BLOB, &name).await;
        }
        let mut parts = Vec::new();
        if let Some(data) = blob_if_any(store, &key, FILE_BLOB).await? {
            parts.push(FilePart::new("file", name.as_str(), data));
        }
        for file in value.file_names() {
            if let Some(data) = blob_if_any(store, &key, &file).await? {
                parts.push(FilePart::new("files", file, data));
            }
        }
        multipart_response(&value, parts)
    };
    let (c, i) = (collection.clone(), Arc::clone(&item));
    let put_item = move |Path(params): Path<HashMap<String, String>>, form: Multipart| async move {
        let (parent, name) = split(&i, &params)?;
        let form = MultipartForm::read(form, max_file).await?;
        let (status, value) = write_form(&c, &parent, Some(&name), &form).await?;
        Ok::<_, ApiError>(json_response(status, &value))
    };
    let (c, i) = (collection, item);
    let delete_item = move |Path(params): Path<HashMap<String, String>>| async move {
        let (parent, name) = split(&i, &params)?;
        c.delete(&parent, &name).await?;
        Ok::<_, ApiError>(StatusCode::NO_CONTENT)
    };
    Router::new()
        .route(&collection_path, get(list).post(create))
        .route(&item_path, get(get_item).put(put_item).delete(delete_item))
}
