//! A controller's intent types: their REST routes under a deployment intent group, and reading
//! them back at instantiate time.
//!
//! An intent type is a serde struct with validation ([`Object`]) that declares its URL segment
//! and item parameter. Top-level intents live under the DIG ([`Dig`] as parent); nested ones
//! (gac's resources under a generic-k8s-intent) name their parent intent type, and the URL and
//! the resource key follow the chain. Keys are derived from the URL with the REST kit's
//! [`KeyPattern`], so the routes, the orchestrator and the controller agree on them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use emco_appcontext::collection::{Collection, Object, Wording};
use emco_appcontext::keys::{CLUSTER_LABEL, GROUP_INTENT, KV_PAIR, Keyed};
use emco_core::model::{ClusterLabel, DigIntent, KvPair};
use emco_core::{ClusterRef, Error, ErrorKind, Result};
use emco_store::{ResourceKey, ResourceStore};
use serde_json::Value;

use crate::controller::ControllerContext;

/// EMCO's URL of a deployment intent group, below `/v2`.
pub const DIG_PATH: &str = "/projects/{project}/composite-apps/{compositeApp}/\
                            {compositeAppVersion}/deployment-intent-groups/{deploymentIntentGroup}";

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

/// An intent type of a controller, declared with `#[derive(Object)]` and `#[intent(...)]`
/// (emco-core's `Object`; the facade's `emco::Object`).
///
/// ```
/// use emco_controller_sdk::intent::{Dig, IntentType};
/// use emco_core::{Metadata, Object};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Object)]
/// #[object(metadata)]
/// #[intent(parent = Dig, segment = "label-intents", param = "labelIntent")]
/// struct LabelIntent { metadata: Metadata }
///
/// #[derive(Serialize, Deserialize, Object)]
/// #[intent(parent = LabelIntent, segment = "labels", param = "label")]
/// struct Label { metadata: Metadata }
///
/// assert!(LabelIntent::collection_path().ends_with("/{deploymentIntentGroup}/label-intents"));
/// assert!(Label::collection_path().ends_with("/label-intents/{labelIntent}/labels"));
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
    #[cfg(feature = "rest")]
    fn routes<S: Clone + Send + Sync + 'static>(store: Arc<dyn ResourceStore>) -> axum::Router<S> {
        emco_rest::Routes::<Self>::new(format!("/v2{}", Self::collection_path()), Self::PARAM)
            .serve(Self::collection(store))
    }

    /// The routes of a type whose objects carry files: the REST kit's `FileRoutes` over its
    /// collection under `/v2`, with the `files` named by [`IntentType::file_names`], each at
    /// most `max_file` bytes.
    #[cfg(feature = "rest")]
    fn file_routes<S: Clone + Send + Sync + 'static>(
        store: Arc<dyn ResourceStore>,
        max_file: u64,
    ) -> axum::Router<S> {
        emco_rest::FileRoutes::new(
            format!("/v2{}", Self::collection_path()),
            Self::PARAM,
            Self::collection(store),
        )
        .max_file(max_file)
        .extra_files(Self::file_names)
        .serve()
    }

    /// The typed collection over `store`.
    #[must_use]
    fn collection(store: Arc<dyn ResourceStore>) -> Collection<Self> {
        Collection::new(store, Self::PARAM).with_wording(Self::wording())
    }

    /// The `files` this object refers to (blobs under their file names, see
    /// [`IntentType::file_routes`]), which a GET with `Accept: multipart/form-data` answers as
    /// `files` parts. None by default.
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

impl ControllerContext {
    /// The labels of a cluster (`provider+cluster`), from clm's objects in the resource store.
    ///
    /// # Errors
    /// `NotFound` when the cluster is not registered; `FailedPrecondition` without a resource
    /// store.
    pub async fn cluster_labels(&self, cluster: &str) -> Result<BTreeSet<String>> {
        let key = cluster.parse::<ClusterRef>()?.key();
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
        let key = cluster.parse::<ClusterRef>()?.key();
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
        self.meta()
            .await?
            .dig()
            .checked()
            .map(|dig| dig.key())
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
    /// this method's caller), in creation order, each with its key.
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
