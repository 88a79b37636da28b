//! One object type's create/get/list/put/delete as EMCO's routes, over a [`Collection`].

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use emco_appcontext::collection::{Collection, EmptyList, Hook, NoHook, Object, Wording};
use emco_core::{Error, Result};
use emco_store::{Filter, ResourceKey, ResourceStore};
use http::StatusCode;
use serde::Serialize;

use crate::{ApiError, EmcoJson, KeyPattern, RawBody};

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
    put: bool,
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
            put: true,
        }
    }

    /// Serves no `PUT item` (workflowmgr's intents are created and deleted, never replaced):
    /// a PUT is answered 405, as by EMCO's router.
    #[must_use]
    pub fn without_put(mut self) -> Self {
        self.put = false;
        self
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
            list_response(c2.wording(), &items)
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
            let status = put_status(c4.wording(), created);
            Ok::<_, ApiError>(json_response(status, &stored))
        };
        let (c5, p5, n5) = (collection, parent, item_param);
        let delete_item = move |Path(params): Path<HashMap<String, String>>| async move {
            let (parent, name) = item_key(&p5, &n5, &params)?;
            c5.delete(&parent, &name).await?;
            Ok::<_, ApiError>(StatusCode::NO_CONTENT)
        };

        let item = get(get_item).delete(delete_item);
        let item = if self.put { item.put(put_item) } else { item };
        let mut router = Router::new()
            .route(&self.collection_path, get(list).post(create))
            .route(&item_path, item);
        if has_views {
            router = router.route(&format!("{}/", self.collection_path), get(view));
        }
        router
    }
}

/// The parent key and item name of an item route: `parent`'s key from the route's `params`, and
/// the name in `item_param`.
///
/// # Errors
/// InvalidArgument when a parameter is missing or the name empty.
pub fn item_key(
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

/// The status of a PUT that `created` the object or replaced it, as the type's `wording` says.
#[must_use]
pub fn put_status(wording: &Wording, created: bool) -> StatusCode {
    if wording.put_answers_created(created) {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    }
}

/// The answer to a GET of the list `items`, as the type's `wording` says an empty one reads.
///
/// # Errors
/// A 400 for an empty list the type refuses ([`EmptyList::Refused`]).
pub fn list_response<V: Serialize>(wording: &Wording, items: &[V]) -> Result<Response, ApiError> {
    if items.is_empty() {
        match wording.empty_list {
            EmptyList::Null => return Ok(json_response(StatusCode::OK, &serde_json::Value::Null)),
            EmptyList::Refused(text) => return Err(Error::invalid(text).into()),
            EmptyList::Array => {}
        }
    }
    Ok(json_response(StatusCode::OK, items))
}
