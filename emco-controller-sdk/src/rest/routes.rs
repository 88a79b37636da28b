//! One object type's create/get/list/put/delete over the resource store, typed and as routes.

use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use axum::Router;
use axum::extract::{Path, Query};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use emco_appcontext::{Filter, ResourceKey, ResourceStore};
use emco_core::model::Named;
use emco_core::{Error, ErrorKind, Result, Validate};
use http::StatusCode;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::wording::Wording;
use super::{ApiError, EmcoJson, KeyPattern, RawBody};

/// What a body type needs to be served by [`Collection`] and [`Routes`].
pub trait Object: Serialize + DeserializeOwned + Validate + Named + Send + Sync + 'static {}
impl<T: Serialize + DeserializeOwned + Validate + Named + Send + Sync + 'static> Object for T {}

/// Checks and side effects around the writes of a [`Collection`], for rules beyond parent/child
/// integrity (a referenced object must exist, a deployment intent group must be in a state
/// that allows the change, ...). Every method defaults to doing nothing.
#[async_trait]
pub trait Hook<T: Send + Sync>: Send + Sync + 'static {
    /// Normalizes a valid object before it is checked and stored (fills defaults); what it
    /// leaves is what is stored and echoed.
    fn prepare(&self, value: &mut T) {
        let _ = value;
    }

    /// Before `value` is created or replaced at `key`; an error aborts the write.
    async fn before_write(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        value: &T,
    ) -> Result<()> {
        let _ = (store, key, value);
        Ok(())
    }

    /// After `value` was written at `key` (`created` tells a create from a replace).
    async fn after_write(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        value: &T,
        created: bool,
    ) -> Result<()> {
        let _ = (store, key, value, created);
        Ok(())
    }

    /// Before the object at `key` is deleted; an error aborts the delete.
    async fn before_delete(&self, store: &dyn ResourceStore, key: &ResourceKey) -> Result<()> {
        let _ = (store, key);
        Ok(())
    }

    /// After the object at `key` was deleted.
    async fn after_delete(&self, store: &dyn ResourceStore, key: &ResourceKey) -> Result<()> {
        let _ = (store, key);
        Ok(())
    }
}

/// The hook that does nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHook;

impl<T: Send + Sync + 'static> Hook<T> for NoHook {}

/// The objects of type `T` that live under parents as children of type `kind`: the typed API
/// behind [`Routes`], usable on its own by services that are not REST.
pub struct Collection<T> {
    store: Arc<dyn ResourceStore>,
    kind: String,
    hook: Arc<dyn Hook<T>>,
    wording: Arc<Wording>,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Collection<T> {
    fn clone(&self) -> Self {
        Self {
            store: Arc::clone(&self.store),
            kind: self.kind.clone(),
            hook: Arc::clone(&self.hook),
            wording: Arc::clone(&self.wording),
            _t: PhantomData,
        }
    }
}

impl<T> fmt::Debug for Collection<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Collection")
            .field("kind", &self.kind)
            .field("type", &std::any::type_name::<T>())
            .finish_non_exhaustive()
    }
}

fn to_value<T: Serialize>(value: &T) -> Result<serde_json::Value> {
    serde_json::to_value(value)
        .map_err(|e| Error::internal("cannot serialize an object").with_source(e))
}

/// A copy of `value` through its JSON form, so body types need not be `Clone`.
fn copy_of<T: Serialize + DeserializeOwned>(value: &T) -> Result<T> {
    serde_json::from_value(to_value(value)?)
        .map_err(|e| Error::internal("an object does not survive its own JSON form").with_source(e))
}

/// A stored object read with Go's rules, so objects EMCO's Go services stored (with `null` for
/// empty maps and lists) read too.
fn from_value<T: DeserializeOwned>(key: &ResourceKey, value: serde_json::Value) -> Result<T> {
    emco_go::json::from_value(&value)
        .map_err(|e| Error::internal(format!("stored object {key} is malformed")).with_source(e))
}

impl<T: Object> Collection<T> {
    /// The objects of type `kind` in `store`, with no extra checks.
    pub fn new(store: Arc<dyn ResourceStore>, kind: impl Into<String>) -> Self {
        let kind = kind.into();
        Self {
            store,
            wording: Arc::new(Wording::named(&kind)),
            kind,
            hook: Arc::new(NoHook),
            _t: PhantomData,
        }
    }

    /// Answers with `wording` (EMCO's texts and codes for this type); the default is
    /// [`Wording::named`] with the kind.
    #[must_use]
    pub fn with_wording(mut self, wording: Wording) -> Self {
        self.wording = Arc::new(wording);
        self
    }

    /// How this type's answers are worded.
    #[must_use]
    pub fn wording(&self) -> &Wording {
        &self.wording
    }

    /// Runs `hook` around every write.
    #[must_use]
    pub fn with_hook(mut self, hook: impl Hook<T>) -> Self {
        self.hook = Arc::new(hook);
        self
    }

    /// Like [`Self::with_hook`] for a shared hook.
    #[must_use]
    pub fn with_shared_hook(mut self, hook: Arc<dyn Hook<T>>) -> Self {
        self.hook = hook;
        self
    }

    /// The store.
    #[must_use]
    pub fn store(&self) -> &Arc<dyn ResourceStore> {
        &self.store
    }

    /// The child type of the objects.
    #[must_use]
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The key of the object `name` under `parent`.
    #[must_use]
    pub fn key(&self, parent: &ResourceKey, name: &str) -> ResourceKey {
        parent.child(self.kind.as_str(), name)
    }

    /// Creates `value` under `parent`; returns the stored object.
    ///
    /// # Errors
    /// InvalidArgument when `value` is invalid; NotFound when `parent` is missing;
    /// AlreadyExists for a duplicate; the hook's errors.
    pub async fn create(&self, parent: &ResourceKey, value: &T) -> Result<T> {
        value.validate()?;
        let mut value = copy_of(value)?;
        self.hook.prepare(&mut value);
        let value = &value;
        let key = self.key(parent, value.name());
        self.hook
            .before_write(self.store.as_ref(), &key, value)
            .await?;
        self.store
            .create(&key, &to_value(value)?)
            .await
            .map_err(|e| self.wording.write_error(e))?;
        self.hook
            .after_write(self.store.as_ref(), &key, value, true)
            .await?;
        copy_of(value)
    }

    /// The object `name` under `parent`.
    ///
    /// # Errors
    /// NotFound when it does not exist.
    pub async fn get(&self, parent: &ResourceKey, name: &str) -> Result<T> {
        let key = self.key(parent, name);
        match self.store.get(&key).await? {
            Some(v) => from_value(&key, v),
            None => Err(self.wording.missing()),
        }
    }

    /// The check of [`Wording::ancestor_first`], if the wording has one.
    ///
    /// # Errors
    /// NotFound with the wording's text when the ancestor is missing.
    pub async fn check_ancestor(&self, parent: &ResourceKey) -> Result<()> {
        let Some((up, text)) = &self.wording.ancestor_first else {
            return Ok(());
        };
        match ancestor(parent, *up) {
            Some(k) if self.store.get(&k).await?.is_none() => Err(Error::not_found(text.clone())),
            _ => Ok(()),
        }
    }

    /// The objects under `parent` that pass `filters`, in name order.
    ///
    /// # Errors
    /// NotFound when `parent` (or an ancestor the wording names) does not exist.
    pub async fn list(&self, parent: &ResourceKey, filters: &[Filter]) -> Result<Vec<T>> {
        match &self.wording.list_checks {
            None => {
                if !parent.is_root() && self.store.get(parent).await?.is_none() {
                    return Err(Error::not_found(format!("{parent} not found")));
                }
            }
            Some(checks) => {
                for (up, text) in checks {
                    let Some(at) = ancestor(parent, *up) else {
                        continue;
                    };
                    if self.store.get(&at).await?.is_none() {
                        return Err(Error::not_found(text.clone()));
                    }
                }
                if !parent.is_root() && self.store.get(parent).await?.is_none() {
                    return Ok(Vec::new());
                }
            }
        }
        self.store
            .list(parent, &self.kind, filters)
            .await?
            .into_iter()
            .map(|(k, v)| from_value(&k, v))
            .collect()
    }

    /// Creates or replaces the object `name` under `parent`; returns whether it was created.
    ///
    /// # Errors
    /// As [`Self::put_stored`].
    pub async fn put(&self, parent: &ResourceKey, name: &str, value: &T) -> Result<bool> {
        self.put_stored(parent, name, value)
            .await
            .map(|(_, created)| created)
    }

    /// Creates or replaces the object `name` under `parent`; returns the stored object (after
    /// [`Hook::prepare`]) and whether it was created.
    ///
    /// # Errors
    /// InvalidArgument when `value` is invalid or its name is not `name`; NotFound when
    /// `parent` is missing (or the object, when the wording has [`Wording::put_missing`]); the
    /// hook's errors.
    pub async fn put_stored(
        &self,
        parent: &ResourceKey,
        name: &str,
        value: &T,
    ) -> Result<(T, bool)> {
        if let Some(text) = &self.wording.put_missing
            && self.store.get(&self.key(parent, name)).await?.is_none()
        {
            return Err(Error::not_found(text.clone()));
        }
        // EMCO's PUT handlers refuse a body naming another object before checking the rest.
        if !value.name().is_empty() {
            self.wording.check_put_name(value.name(), name)?;
        }
        value.validate()?;
        let mut value = copy_of(value)?;
        self.hook.prepare(&mut value);
        let value = &value;
        self.wording.check_put_name(value.name(), name)?;
        let key = self.key(parent, name);
        self.hook
            .before_write(self.store.as_ref(), &key, value)
            .await?;
        let doc = to_value(value)?;
        let created = if self.store.get(&key).await?.is_some() {
            self.store.update(&key, &doc).await?;
            false
        } else {
            match self.store.create(&key, &doc).await {
                Ok(()) => true,
                // Created concurrently since we looked: replace it.
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    self.store.update(&key, &doc).await?;
                    false
                }
                Err(e) => return Err(self.wording.write_error(e)),
            }
        };
        self.hook
            .after_write(self.store.as_ref(), &key, value, created)
            .await?;
        Ok((copy_of(value)?, created))
    }

    /// Deletes the object `name` under `parent`.
    ///
    /// # Errors
    /// NotFound when it does not exist; Conflict while it has children; the hook's errors.
    pub async fn delete(&self, parent: &ResourceKey, name: &str) -> Result<()> {
        let key = self.key(parent, name);
        if self.store.get(&key).await?.is_none() {
            return Err(Error::not_found(self.wording.delete_missing.clone()));
        }
        self.hook.before_delete(self.store.as_ref(), &key).await?;
        self.store
            .delete(&key)
            .await
            .map_err(|e| self.wording.delete_error(e))?;
        self.hook.after_delete(self.store.as_ref(), &key).await
    }
}

/// Builds EMCO's five routes for one object type from its collection URL:
///
/// | route | answer |
/// |---|---|
/// | `POST collection` | 201 with the stored JSON; 409 duplicate; 404 missing parent |
/// | `GET collection` | 200 with the list (filtered by the declared query parameters) |
/// | `GET item` | 200, or 404 |
/// | `PUT item` | 200 replaced / 201 created; 400 when the body's name is not the URL's |
/// | `DELETE item` | 204; 404 missing; 409 while it has children |
///
/// The object's key comes from the path parameters (see [`KeyPattern`]) and the item's own
/// parameter names its child type.
pub struct Routes<T> {
    collection_path: String,
    item_param: String,
    hook: Arc<dyn Hook<T>>,
    wording: Option<Wording>,
    filters: Vec<(String, String)>,
    item_views: Vec<(String, View<T>)>,
    collection_views: Vec<(String, CollectionView<T>)>,
    list_view: Option<ListView<T>>,
}

/// Answers `GET item?{query}=V` from the item (its error, a 404 for a missing value, is sent).
pub type View<T> = fn(&T, &str) -> Result<serde_json::Value>;
/// Answers `GET collection/?{query}=...` from the whole list and the query.
pub type CollectionView<T> = fn(&[T], &HashMap<String, String>) -> Result<serde_json::Value>;
/// Answers `GET collection` from the whole list, in place of the list itself.
pub type ListView<T> = fn(&[T]) -> serde_json::Value;

impl<T> fmt::Debug for Routes<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Routes")
            .field("collection_path", &self.collection_path)
            .field("item_param", &self.item_param)
            .field("filters", &self.filters)
            .finish_non_exhaustive()
    }
}

impl<T: Object> Routes<T> {
    /// Routes for the collection at `collection_path` whose items are `{collection_path}/{item_param}`.
    pub fn new(collection_path: impl Into<String>, item_param: impl Into<String>) -> Self {
        Self {
            collection_path: collection_path.into(),
            item_param: item_param.into(),
            hook: Arc::new(NoHook),
            wording: None,
            filters: Vec::new(),
            item_views: Vec::new(),
            collection_views: Vec::new(),
            list_view: None,
        }
    }

    /// `GET item?{query}=V` answers `view(item, V)` instead of the item (EMCO's `?key=` of kv-pairs).
    #[must_use]
    pub fn item_view(mut self, query: impl Into<String>, view: View<T>) -> Self {
        self.item_views.push((query.into(), view));
        self
    }

    /// `GET collection/?{query}=...` (with the trailing slash, as EMCO's routers register
    /// their query routes) answers `view(all items, query)`; without `query` it is no route.
    /// EMCO's `?intent=` and `?app=` queries return one object's spec this way.
    #[must_use]
    pub fn collection_view(mut self, query: impl Into<String>, view: CollectionView<T>) -> Self {
        self.collection_views.push((query.into(), view));
        self
    }

    /// `GET collection` answers `view(all items)` instead of the list (EMCO's `/intents`
    /// answers only the intents' maps).
    #[must_use]
    pub fn list_view(mut self, view: ListView<T>) -> Self {
        self.list_view = Some(view);
        self
    }

    /// Runs `hook` around every write.
    #[must_use]
    pub fn hook(mut self, hook: impl Hook<T>) -> Self {
        self.hook = Arc::new(hook);
        self
    }

    /// Like [`Self::hook`] for a shared hook.
    #[must_use]
    pub fn shared_hook(mut self, hook: Arc<dyn Hook<T>>) -> Self {
        self.hook = hook;
        self
    }

    /// Answers with `wording` (see [`Collection::with_wording`]); not used by [`Self::serve`],
    /// whose collection has its own.
    #[must_use]
    pub fn wording(mut self, wording: Wording) -> Self {
        self.wording = Some(wording);
        self
    }

    /// `GET collection?{query}=V` keeps the objects whose JSON value at the dotted `path` is V.
    #[must_use]
    pub fn filter(mut self, query: impl Into<String>, path: impl Into<String>) -> Self {
        self.filters.push((query.into(), path.into()));
        self
    }

    /// The routes, over `store`: the objects are children of type `item_param`.
    pub fn router<S: Clone + Send + Sync + 'static>(
        mut self,
        store: Arc<dyn ResourceStore>,
    ) -> Router<S> {
        let mut collection = Collection::<T>::new(store, self.item_param.clone())
            .with_shared_hook(Arc::clone(&self.hook));
        if let Some(wording) = self.wording.take() {
            collection = collection.with_wording(wording);
        }
        self.serve(collection)
    }

    /// The routes over an existing typed `collection` (its kind and hook apply; the hook given to
    /// [`Self::hook`] is not used). Its kind should be the item parameter's name, so that keys
    /// agree with other routes.
    pub fn serve<S: Clone + Send + Sync + 'static>(self, collection: Collection<T>) -> Router<S> {
        let collection = Arc::new(collection);
        let parent = Arc::new(KeyPattern::parse(&self.collection_path));
        let filters = Arc::new(self.filters);
        let item_views = Arc::new(self.item_views);
        let has_views = !self.collection_views.is_empty();
        let collection_views = Arc::new(self.collection_views);
        let list_view = self.list_view;
        let item_param = Arc::new(self.item_param);
        let item_path = format!("{}/{{{}}}", self.collection_path, item_param);

        let (c1, p1) = (Arc::clone(&collection), Arc::clone(&parent));
        let create = move |Path(params): Path<HashMap<String, String>>, RawBody(body): RawBody| async move {
            let parent = p1.key(&params)?;
            c1.check_ancestor(&parent).await?;
            let value = EmcoJson::<T>::parse(&body)?;
            let stored = c1.create(&parent, &value).await?;
            Ok::<_, ApiError>(json_response(StatusCode::CREATED, &stored))
        };
        let (c2, p2) = (Arc::clone(&collection), Arc::clone(&parent));
        let list = move |Path(params): Path<HashMap<String, String>>,
                         Query(query): Query<HashMap<String, String>>| async move {
            let parent = p2.key(&params)?;
            let active: Vec<Filter> = filters
                .iter()
                .filter_map(|(q, path)| query.get(q).map(|v| Filter::eq(path.as_str(), v.as_str())))
                .collect();
            let items = c2.list(&parent, &active).await?;
            if let Some(view) = list_view {
                return Ok(json_response(StatusCode::OK, &view(&items)));
            }
            c2.wording().list_response(&items)
        };
        let (c6, p6) = (Arc::clone(&collection), Arc::clone(&parent));
        let view = move |Path(params): Path<HashMap<String, String>>,
                         Query(query): Query<HashMap<String, String>>| async move {
            let Some(view) = collection_views
                .iter()
                .find_map(|(q, view)| query.contains_key(q).then_some(*view))
            else {
                return Err(ApiError::from(Error::not_found("404 page not found")));
            };
            let items = c6.list(&p6.key(&params)?, &[]).await?;
            Ok::<_, ApiError>(json_response(StatusCode::OK, &view(&items, &query)?))
        };
        let (c3, p3, n3) = (
            Arc::clone(&collection),
            Arc::clone(&parent),
            Arc::clone(&item_param),
        );
        let get_item = move |Path(params): Path<HashMap<String, String>>,
                             Query(query): Query<HashMap<String, String>>| async move {
            let (parent, name) = item_key(&p3, &n3, &params)?;
            let item = c3.get(&parent, &name).await?;
            for (q, view) in item_views.iter() {
                if let Some(v) = query.get(q) {
                    return Ok(json_response(StatusCode::OK, &view(&item, v)?));
                }
            }
            Ok::<_, ApiError>(json_response(StatusCode::OK, &item))
        };
        let (c4, p4, n4) = (
            Arc::clone(&collection),
            Arc::clone(&parent),
            Arc::clone(&item_param),
        );
        let put_item = move |Path(params): Path<HashMap<String, String>>,
                             RawBody(body): RawBody| async move {
            let (parent, name) = item_key(&p4, &n4, &params)?;
            c4.check_ancestor(&parent).await?;
            let value = EmcoJson::<T>::parse_put(&body)?;
            let (stored, created) = c4.put_stored(&parent, &name, &value).await?;
            let status = c4.wording().put_status(created);
            Ok::<_, ApiError>(json_response(status, &stored))
        };
        let (c5, p5, n5) = (collection, parent, item_param);
        let delete_item = move |Path(params): Path<HashMap<String, String>>| async move {
            let (parent, name) = item_key(&p5, &n5, &params)?;
            c5.delete(&parent, &name).await?;
            Ok::<_, ApiError>(StatusCode::NO_CONTENT)
        };

        let mut router = Router::new()
            .route(&self.collection_path, get(list).post(create))
            .route(&item_path, get(get_item).put(put_item).delete(delete_item));
        if has_views {
            router = router.route(&format!("{}/", self.collection_path), get(view));
        }
        router
    }
}

/// The key `up` levels above `key` (0 is `key` itself); `None` past the root or at it.
fn ancestor(key: &ResourceKey, up: usize) -> Option<ResourceKey> {
    let mut at = Some(key.clone());
    for _ in 0..up {
        at = at.and_then(|k| k.parent());
    }
    at.filter(|k| !k.is_root())
}

/// The parent key and item name of an item route.
fn item_key(
    parent: &KeyPattern,
    item_param: &str,
    params: &HashMap<String, String>,
) -> Result<(ResourceKey, String)> {
    let key = parent.key(params)?;
    match params.get(item_param) {
        Some(name) if !name.is_empty() => Ok((key, name.clone())),
        _ => Err(Error::invalid(format!(
            "path parameter {item_param} is missing"
        ))),
    }
}

/// A JSON answer with `status`; a value that cannot be serialized is a 500.
pub fn json_response<V: Serialize + ?Sized>(status: StatusCode, value: &V) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => (
            status,
            [(http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        Err(e) => ApiError::from(Error::internal("cannot serialize the answer").with_source(e))
            .into_response(),
    }
}
