//! A controller's intent types: their REST routes under a deployment intent group, and reading
//! them back at instantiate time.
//!
//! An intent type is a serde struct with validation ([`Object`]) that declares its URL segment
//! and item parameter. Top-level intents live under the DIG ([`Dig`] as parent); nested ones
//! (gac's resources under a generic-k8s-intent) name their parent intent type, and the URL and
//! the resource key follow the chain. Keys are derived from the URL with the REST kit's
//! [`KeyPattern`], so the routes, the orchestrator and the controller agree on them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use axum::Router;
use axum::extract::{Multipart, Path};
use axum::routing::get;
use emco_appcontext::{BlobStream, ResourceKey, ResourceStore};
use emco_core::model::{ClusterLabel, DigIntent, KvPair};
use emco_core::{Error, ErrorKind, Result};
use http::{HeaderMap, StatusCode};
use serde_json::Value;

use crate::controller::ControllerContext;
use crate::rest::accept::{FilePart, multipart_response};
use crate::rest::multipart::{MultipartForm, UploadedFile};
use crate::rest::{
    ApiError, Collection, KeyPattern, Object, Representation, Routes, Wording, json_response,
};

/// EMCO's URL of a deployment intent group, below `/v2`.
pub const DIG_PATH: &str = "/projects/{project}/composite-apps/{compositeApp}/\
                            {compositeAppVersion}/deployment-intent-groups/{deploymentIntentGroup}";

/// EMCO's URL of a cluster, below `/v2`.
pub const CLUSTER_PATH: &str = "/cluster-providers/{clusterProvider}/clusters/{cluster}";

/// The child type of cluster labels (`CLUSTER/labels/{clusterLabel}`).
pub const CLUSTER_LABEL: &str = "clusterLabel";

/// The child type of cluster kv-pairs (`CLUSTER/kv-pairs/{kvPair}`).
pub const KV_PAIR: &str = "kvPair";

/// The child type of the DIG intents (`DIG/intents/{groupIntent}`).
pub const GROUP_INTENT: &str = "groupIntent";

/// Something intents are nested under: the DIG, or another intent type.
pub trait IntentParent {
    /// The URL of one parent item below `/v2`, with its path parameters.
    fn item_path() -> String;
}

/// The deployment intent group, parent of top-level intents.
#[derive(Debug, Clone, Copy)]
pub struct Dig;

impl IntentParent for Dig {
    fn item_path() -> String {
        DIG_PATH.to_owned()
    }
}

/// An intent type of a controller.
///
/// ```
/// use emco_controller_sdk::intent::{Dig, IntentType};
/// use emco_core::{Metadata, Result, Validate, model::Named};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct LabelIntent { metadata: Metadata }
/// impl Validate for LabelIntent { fn validate(&self) -> Result<()> { Ok(()) } }
/// impl Named for LabelIntent { fn name(&self) -> &str { &self.metadata.name } }
/// impl IntentType for LabelIntent {
///     type Parent = Dig;
///     const SEGMENT: &'static str = "label-intents";
///     const PARAM: &'static str = "labelIntent";
/// }
/// assert!(LabelIntent::collection_path().ends_with("/{deploymentIntentGroup}/label-intents"));
/// ```
pub trait IntentType: Object {
    /// The parent: [`Dig`] or another intent type.
    type Parent: IntentParent;
    /// The URL segment of the collection under the parent (`generic-k8s-intents`).
    const SEGMENT: &'static str;
    /// The path parameter naming one item (`genericK8sIntent`); also its key's child type.
    const PARAM: &'static str;

    /// The collection's URL below `/v2`.
    #[must_use]
    fn collection_path() -> String {
        format!("{}/{}", Self::Parent::item_path(), Self::SEGMENT)
    }

    /// How the controller's Go service words this type's answers; by default EMCO's
    /// `<param> not found` / `<param> already exists` (gac's convention).
    #[must_use]
    fn wording() -> Wording {
        Wording::named(Self::PARAM)
    }

    /// The REST routes (collection and item, EMCO's status codes) under `/v2`.
    fn routes<S: Clone + Send + Sync + 'static>(store: Arc<dyn ResourceStore>) -> Router<S> {
        Routes::<Self>::new(format!("/v2{}", Self::collection_path()), Self::PARAM)
            .serve(Self::collection(store))
    }

    /// The typed collection over `store`.
    #[must_use]
    fn collection(store: Arc<dyn ResourceStore>) -> Collection<Self> {
        Collection::new(store, Self::PARAM).with_wording(Self::wording())
    }

    /// The `files` this object refers to (blobs under their file names, see [`file_routes`]),
    /// which a GET with `Accept: multipart/form-data` answers as `files` parts. None by default.
    #[must_use]
    fn file_names(&self) -> Vec<String> {
        Vec::new()
    }
}

impl<T: IntentType> IntentParent for T {
    fn item_path() -> String {
        format!("{}/{{{}}}", T::collection_path(), T::PARAM)
    }
}

/// The resource key of a deployment intent group.
///
/// # Errors
/// `InvalidArgument` when a name is empty.
pub fn dig_key(
    project: &str,
    composite_app: &str,
    version: &str,
    dig: &str,
) -> Result<ResourceKey> {
    let values = HashMap::from([
        ("project".to_owned(), project.to_owned()),
        ("compositeApp".to_owned(), composite_app.to_owned()),
        ("compositeAppVersion".to_owned(), version.to_owned()),
        ("deploymentIntentGroup".to_owned(), dig.to_owned()),
    ]);
    KeyPattern::parse(DIG_PATH).key(&values)
}

/// The resource key of a cluster named as in an AppContext (`provider+cluster`).
///
/// # Errors
/// `InvalidArgument` when the name has no `+` or an empty part.
pub fn cluster_key(cluster: &str) -> Result<ResourceKey> {
    let (provider, name) = cluster.split_once('+').ok_or_else(|| {
        Error::invalid(format!("cluster {cluster:?} is not named provider+cluster"))
    })?;
    let values = HashMap::from([
        ("clusterProvider".to_owned(), provider.to_owned()),
        ("cluster".to_owned(), name.to_owned()),
    ]);
    KeyPattern::parse(CLUSTER_PATH).key(&values)
}

impl ControllerContext {
    /// The labels of a cluster (`provider+cluster`), from clm's objects in the resource store.
    ///
    /// # Errors
    /// `NotFound` when the cluster is not registered; `FailedPrecondition` without a resource
    /// store.
    pub async fn cluster_labels(&self, cluster: &str) -> Result<BTreeSet<String>> {
        let key = cluster_key(cluster)?;
        let labels =
            Collection::<ClusterLabel>::new(Arc::clone(self.resource_store()?), CLUSTER_LABEL)
                .list(&key, &[])
                .await?;
        Ok(labels.into_iter().map(|l| l.cluster_label).collect())
    }

    /// The kv-pairs of a cluster (`provider+cluster`), every entry of every kv-pair object
    /// (the first one wins for a key given twice).
    ///
    /// # Errors
    /// As [`cluster_labels`](Self::cluster_labels).
    pub async fn cluster_kv(&self, cluster: &str) -> Result<BTreeMap<String, Value>> {
        let key = cluster_key(cluster)?;
        let pairs = Collection::<KvPair>::new(Arc::clone(self.resource_store()?), KV_PAIR)
            .list(&key, &[])
            .await?;
        let mut out = BTreeMap::new();
        for entry in pairs.iter().flat_map(|p| p.spec.kv.iter()) {
            for (k, v) in entry {
                out.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        Ok(out)
    }

    /// The resource key of the DIG this context was made for (from the context's metadata).
    ///
    /// # Errors
    /// `NotFound` when the context has no metadata; `InvalidArgument` when it names no DIG.
    pub async fn dig_key(&self) -> Result<ResourceKey> {
        let meta = self.meta().await?;
        dig_key(
            &meta.project,
            &meta.composite_app,
            &meta.version,
            &meta.deployment_intent_group,
        )
        .map_err(|e| e.within(&format!("the metadata of AppContext {}", self.id())))
    }

    /// The names of the intents the DIG gives controller `controller` (`spec.intent` of the DIG
    /// intents), for placement controllers, whose request carries no intent name.
    ///
    /// # Errors
    /// `FailedPrecondition` without a resource store; the store's errors.
    pub async fn intent_names_for(&self, controller: &str) -> Result<Vec<String>> {
        let dig = self.dig_key().await?;
        let groups = Collection::<DigIntent>::new(Arc::clone(self.resource_store()?), GROUP_INTENT)
            .list(&dig, &[])
            .await?;
        let mut names: Vec<String> = groups
            .iter()
            .filter_map(|g| g.spec.intent.get(controller).cloned())
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// The top-level intent `name` of type `T` under this context's DIG, with its key (to read
    /// its children with [`children`](Self::children)).
    ///
    /// # Errors
    /// `NotFound` when the DIG has no such intent; `FailedPrecondition` without a resource store.
    pub async fn intent_named<T: IntentType<Parent = Dig>>(
        &self,
        name: &str,
    ) -> Result<(ResourceKey, T)> {
        let dig = self.dig_key().await?;
        let intent = T::collection(Arc::clone(self.resource_store()?))
            .get(&dig, name)
            .await
            // The REST wording names no object; an instantiate's reason should.
            .map_err(|e| match e.kind() {
                ErrorKind::NotFound => Error::not_found(format!("{} {name:?} not found", T::PARAM)),
                _ => e,
            })?;
        Ok((dig.child(T::PARAM, name), intent))
    }

    /// The top-level intent the DIG names for this controller (the request's intent name).
    ///
    /// # Errors
    /// `FailedPrecondition` when the request named no intent; as
    /// [`intent_named`](Self::intent_named).
    pub async fn intent<T: IntentType<Parent = Dig>>(&self) -> Result<(ResourceKey, T)> {
        let name = self
            .intent_name()
            .ok_or_else(|| Error::failed_precondition("the request names no intent"))?
            .to_owned();
        self.intent_named(&name).await
    }

    /// The intents of type `C` under `parent` (a key returned by [`intent`](Self::intent) or by
    /// this method's caller), in name order, each with its key.
    ///
    /// # Errors
    /// `NotFound` when `parent` does not exist; `FailedPrecondition` without a resource store.
    pub async fn children<C: IntentType>(
        &self,
        parent: &ResourceKey,
    ) -> Result<Vec<(ResourceKey, C)>> {
        let items = C::collection(Arc::clone(self.resource_store()?))
            .list(parent, &[])
            .await?;
        Ok(items
            .into_iter()
            .map(|c| (parent.child(C::PARAM, c.name()), c))
            .collect())
    }
}

/// The blob a form's `file` part is stored as; each `files` part is stored under its file name.
pub const FILE_BLOB: &str = "file";

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
            collection.wording().put_status(created)
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
        c.wording().list_response(&items)
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
