//! The checks beyond parent/child integrity, as write hooks shared by the typed API and REST.

use async_trait::async_trait;
use emco_appcontext::{ResourceKey, ResourceStore};
use emco_controller_sdk::rest::Hook;
use emco_core::lifecycle::{DigOperation, StateInfo, check_delete, transition};
use emco_core::model::{AppDependency, ClusterReference, DeploymentIntentGroup, LogicalCloud};
use emco_core::placement::AppPlacementIntent;
use emco_core::{Error, Result};
use futures::TryStreamExt;

use crate::diglock::DigLocks;
use crate::keys;

/// Fails with NotFound unless `key` exists.
pub(crate) async fn must_exist(
    store: &dyn ResourceStore,
    key: &ResourceKey,
    what: &str,
) -> Result<()> {
    match store.get(key).await? {
        Some(_) => Ok(()),
        None => Err(Error::not_found(format!(
            "{what} {:?} does not exist",
            key.name().unwrap_or_default()
        ))),
    }
}

fn composite_app_of(key: &ResourceKey) -> Result<ResourceKey> {
    keys::enclosing_composite_app(key)
        .ok_or_else(|| Error::internal(format!("{key} is not under a composite app")))
}

/// The lifecycle record of the deployment intent group at `dig`.
///
/// # Errors
/// NotFound when the group does not exist; Internal when the record is corrupt.
pub async fn load_state(store: &dyn ResourceStore, dig: &ResourceKey) -> Result<StateInfo> {
    let chunks: Vec<bytes::Bytes> = store
        .get_blob(dig, keys::STATE_BLOB)
        .await?
        .try_collect()
        .await?;
    let bytes: Vec<u8> = chunks.concat();
    serde_json::from_slice(&bytes)
        .map_err(|e| Error::internal(format!("the state of {dig} is corrupt")).with_source(e))
}

/// Stores the lifecycle record of the deployment intent group at `dig`.
///
/// This is a plain write: a read-modify-write must hold the group's lock, as the orchestrator's
/// own operations do, or a concurrent operation's update can be lost.
///
/// # Errors
/// The store's errors.
pub async fn save_state(
    store: &dyn ResourceStore,
    dig: &ResourceKey,
    state: &StateInfo,
) -> Result<()> {
    let bytes = serde_json::to_vec(state)
        .map_err(|e| Error::internal("cannot serialize a state record").with_source(e))?;
    let data = futures::stream::iter([Ok(bytes::Bytes::from(bytes))]);
    store
        .put_blob(dig, keys::STATE_BLOB, Box::pin(data))
        .await?;
    Ok(())
}

/// Now as RFC 3339 UTC, for state records.
pub(crate) fn now_rfc3339() -> String {
    emco_core::time::rfc3339(std::time::SystemTime::now())
}

/// Applies `op` to the lifecycle record of the group at `dig` under the group's lock, so that
/// concurrent operations on one group each see the record the previous one saved. The record is
/// rewritten only when the operation recorded an action.
///
/// # Errors
/// NotFound when the record does not exist; as [`StateInfo::apply`]; the store's errors.
pub(crate) async fn apply_operation(
    store: &dyn ResourceStore,
    locks: &DigLocks,
    dig: &ResourceKey,
    op: DigOperation,
) -> Result<()> {
    let _held = locks.lock(dig).await;
    let mut state = load_state(store, dig).await?;
    let before = state.actions.len();
    state.apply(op, "", now_rfc3339())?;
    if state.actions.len() != before {
        save_state(store, dig, &state).await?;
    }
    Ok(())
}

/// Records a change of the intents under a deployment intent group: an approved group goes back
/// to Created, as in EMCO.
async fn record_modify(
    store: &dyn ResourceStore,
    locks: &DigLocks,
    key: &ResourceKey,
) -> Result<()> {
    let Some(dig) = keys::enclosing_dig(key) else {
        return Ok(());
    };
    apply_operation(store, locks, &dig, DigOperation::Modify).await
}

/// How the orchestrator builds a collection's hook: those touching a group's lifecycle record
/// share the orchestrator's locks.
pub(crate) trait NewHook {
    /// The hook, with `locks` if it needs them.
    fn new_hook(locks: &DigLocks) -> Self;
}

macro_rules! stateless_hooks {
    ($($hook:ty),+) => {
        $(impl NewHook for $hook {
            fn new_hook(_: &DigLocks) -> Self {
                Self
            }
        })+
    };
}

stateless_hooks!(
    emco_controller_sdk::rest::NoHook,
    DependencyHook,
    ClusterReferenceHook,
    LogicalCloudHook
);

macro_rules! locking_hooks {
    ($($hook:ident),+) => {
        $(impl NewHook for $hook {
            fn new_hook(locks: &DigLocks) -> Self {
                Self(locks.clone())
            }
        })+
    };
}

locking_hooks!(DigHook, DigChildHook, AppIntentHook);

/// Deployment intent groups: the composite profile and logical cloud must exist; PUT only while
/// Created; DELETE refused while deployed; the state record is created with the group.
#[derive(Debug, Clone)]
pub struct DigHook(pub(crate) DigLocks);

#[async_trait]
impl Hook<DeploymentIntentGroup> for DigHook {
    async fn before_write(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        dig: &DeploymentIntentGroup,
    ) -> Result<()> {
        let ca = composite_app_of(key)?;
        must_exist(
            store,
            &ca.child(keys::COMPOSITE_PROFILE, dig.spec.composite_profile.as_str()),
            "composite profile",
        )
        .await?;
        let project = ca.parent().unwrap_or_default();
        must_exist(
            store,
            &project.child(keys::LOGICAL_CLOUD, dig.spec.logical_cloud.as_str()),
            "logical cloud",
        )
        .await?;
        if store.get(key).await?.is_some() {
            let state = load_state(store, key).await?;
            transition(state.current_state(), DigOperation::Put)?;
        }
        Ok(())
    }

    async fn after_write(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        _: &DeploymentIntentGroup,
        created: bool,
    ) -> Result<()> {
        if created {
            let _held = self.0.lock(key).await;
            save_state(store, key, &StateInfo::created(now_rfc3339())).await?;
        }
        Ok(())
    }

    async fn before_delete(&self, store: &dyn ResourceStore, key: &ResourceKey) -> Result<()> {
        let _held = self.0.lock(key).await;
        let state = load_state(store, key).await?;
        check_delete(state.current_state(), None)
    }
}

/// Objects under a deployment intent group (its intents): a change sends an approved group back
/// to Created.
#[derive(Debug, Clone)]
pub struct DigChildHook(pub(crate) DigLocks);

#[async_trait]
impl<T: Send + Sync + 'static> Hook<T> for DigChildHook {
    async fn after_write(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        _: &T,
        _: bool,
    ) -> Result<()> {
        record_modify(store, &self.0, key).await
    }

    async fn after_delete(&self, store: &dyn ResourceStore, key: &ResourceKey) -> Result<()> {
        record_modify(store, &self.0, key).await
    }
}

/// App placement intents: `spec.app` must be an app of the composite app; plus [`DigChildHook`].
#[derive(Debug, Clone)]
pub struct AppIntentHook(pub(crate) DigLocks);

#[async_trait]
impl Hook<AppPlacementIntent> for AppIntentHook {
    async fn before_write(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        intent: &AppPlacementIntent,
    ) -> Result<()> {
        let ca = composite_app_of(key)?;
        must_exist(store, &ca.child(keys::APP, intent.spec.app.as_str()), "app").await
    }

    async fn after_write(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        _: &AppPlacementIntent,
        _: bool,
    ) -> Result<()> {
        record_modify(store, &self.0, key).await
    }

    async fn after_delete(&self, store: &dyn ResourceStore, key: &ResourceKey) -> Result<()> {
        record_modify(store, &self.0, key).await
    }
}

/// App dependencies: `spec.app` must be another app of the composite app.
#[derive(Debug, Clone, Copy, Default)]
pub struct DependencyHook;

#[async_trait]
impl Hook<AppDependency> for DependencyHook {
    async fn before_write(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        dep: &AppDependency,
    ) -> Result<()> {
        let app = key.parent().unwrap_or_default();
        if app.name() == Some(dep.spec.app.as_str()) {
            return Err(Error::invalid("an app cannot depend on itself").with_field("spec.app"));
        }
        let ca = composite_app_of(key)?;
        must_exist(store, &ca.child(keys::APP, dep.spec.app.as_str()), "app").await
    }
}

/// Logical cloud cluster references: the cluster must be registered.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClusterReferenceHook;

#[async_trait]
impl Hook<ClusterReference> for ClusterReferenceHook {
    async fn before_write(
        &self,
        store: &dyn ResourceStore,
        _: &ResourceKey,
        r: &ClusterReference,
    ) -> Result<()> {
        must_exist(
            store,
            &keys::cluster_provider(&r.spec.cluster_provider),
            "cluster provider",
        )
        .await?;
        must_exist(
            store,
            &keys::cluster(&r.spec.cluster_provider, &r.spec.cluster),
            "cluster",
        )
        .await
    }
}

/// Logical clouds: EMCO's defaults (level "1", user type "certificate") are filled in.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogicalCloudHook;

impl Hook<LogicalCloud> for LogicalCloudHook {
    fn prepare(&self, value: &mut LogicalCloud) {
        value.apply_defaults();
    }
}
