//! The checks beyond parent/child integrity, as write hooks shared by the typed API and REST.

use emco_core::poison::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use emco_appcontext::AppContext;
use emco_appcontext::collection::Hook;
use emco_core::drift::DriftPolicy;
use emco_core::lifecycle::{AppContextStatus, DigOperation, StateInfo, check_delete, transition};
use emco_core::model::{AppDependency, ClusterQuota, DeploymentIntentGroup, LogicalCloud};
use emco_core::rollout::RolloutPolicy;
use emco_core::{ContextId, Error, Found, Result};
use emco_store::{AppContextStore, ResourceKey, ResourceStore};

use crate::keys;
use crate::state::{load_state, now_rfc3339, save_state};

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

/// How the orchestrator builds a collection's hook: those touching a group's lifecycle record
/// reach the AppContexts they own.
pub(crate) trait NewHook {
    /// The hook, with `contexts` if it needs them.
    fn new_hook(contexts: &Arc<dyn AppContextStore>) -> Self;
}

/// [`NewHook`] for hooks that hold nothing.
macro_rules! stateless_hooks {
    ($($hook:ty),+) => {
        $(impl $crate::hooks::NewHook for $hook {
            fn new_hook(_: &std::sync::Arc<dyn emco_store::AppContextStore>) -> Self {
                Self
            }
        })+
    };
}
pub(crate) use stateless_hooks;

stateless_hooks!(
    emco_appcontext::collection::NoHook,
    DependencyHook,
    QuotaHook,
    RolloutPolicyHook,
    DriftPolicyHook
);

impl NewHook for DigHook {
    fn new_hook(contexts: &Arc<dyn AppContextStore>) -> Self {
        Self {
            owned: OwnedContexts::new(contexts),
        }
    }
}

impl NewHook for LogicalCloudHook {
    fn new_hook(contexts: &Arc<dyn AppContextStore>) -> Self {
        Self {
            owned: OwnedContexts::new(contexts),
        }
    }
}

/// Deployment intent groups: the composite profile and logical cloud must exist; PUT only while
/// Created; DELETE refused while deployed or while its terminate still runs; the state record is
/// created with the group, and a deleted group's AppContexts are deleted with it.
#[derive(Debug, Clone)]
pub struct DigHook {
    owned: OwnedContexts,
}

/// The AppContexts of objects with a lifecycle record (deployment intent groups, logical
/// clouds), which are deleted with their object.
#[derive(Debug, Clone)]
pub(crate) struct OwnedContexts {
    contexts: Arc<dyn AppContextStore>,
    /// The contexts of objects being deleted, from the check before the delete to the cleanup
    /// after it (the record is gone by then).
    doomed: Arc<Mutex<HashMap<ResourceKey, Vec<ContextId>>>>,
}

impl OwnedContexts {
    pub(crate) fn new(contexts: &Arc<dyn AppContextStore>) -> Self {
        Self {
            contexts: Arc::clone(contexts),
            doomed: Arc::default(),
        }
    }

    /// The status of the record's current context; `None` when it has none or it is gone.
    pub(crate) async fn current_status(
        &self,
        state: &StateInfo,
    ) -> Result<Option<AppContextStatus>> {
        current_status(&self.contexts, state).await
    }

    /// Refuses the delete of `what` while its current context is still being worked on.
    fn refuse_running(what: &str, status: Option<AppContextStatus>) -> Result<()> {
        match status.filter(|s| s.is_running()) {
            Some(s) => Err(Error::conflict(format!(
                "cannot delete {what}: its AppContext is still {s}; wait or stop it"
            ))),
            None => Ok(()),
        }
    }

    /// Remembers every context of `key`'s record for [`Self::delete_doomed`].
    ///
    /// # Errors
    /// Internal for a corrupt record.
    pub(crate) fn doom(&self, key: &ResourceKey, state: &StateInfo) -> Result<()> {
        let ids = state.context_ids()?;
        lock(&self.doomed).insert(key.clone(), ids);
        Ok(())
    }

    /// Deletes the contexts remembered for `key`.
    pub(crate) async fn delete_doomed(&self, key: &ResourceKey) -> Result<()> {
        let ids = lock(&self.doomed).remove(key).unwrap_or_default();
        for id in ids {
            let ctx = AppContext::load(Arc::clone(&self.contexts), id).await;
            if let Some(ctx) = ctx.found()? {
                ctx.unmark_active().await?;
                ctx.delete().await?;
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Hook<DeploymentIntentGroup> for DigHook {
    async fn before_write(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        _: &DeploymentIntentGroup,
    ) -> Result<()> {
        // The composite profile and logical cloud it names may come later: EMCO's database
        // only logs a reference to a missing object (src/orchestrator/pkg/infra/db/mongo.go
        // `verifyReferences`); instantiate refuses what is still missing then.
        if store.get(key).await?.is_some() {
            let state = load_state(store, key).await?;
            // deployment_intent_groups.go: `The DeploymentIntentGroup is not updated` maps to
            // this text (api/apierrors.go).
            transition(state.current_state(), DigOperation::Put).map_err(|_| {
                Error::conflict("The specified DeploymentIntentGroup is not in Created status")
            })?;
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
            save_state(store, key, &StateInfo::created(now_rfc3339())).await?;
        }
        Ok(())
    }

    async fn before_delete(&self, store: &dyn ResourceStore, key: &ResourceKey) -> Result<()> {
        let state = load_state(store, key).await?;
        let current = self.owned.current_status(&state).await?;
        check_delete(state.current_state(), current)?;
        // Intent deletes may have sent a terminated group back to Created while its terminate
        // still runs; its context must not be deleted under rsync either way.
        OwnedContexts::refuse_running(
            &format!(
                "deployment intent group {:?}",
                key.name().unwrap_or_default()
            ),
            current,
        )?;
        self.owned.doom(key, &state)?;
        Ok(())
    }

    async fn after_delete(&self, _: &dyn ResourceStore, key: &ResourceKey) -> Result<()> {
        self.owned.delete_doomed(key).await
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

/// Refuses a second object of child type `child` (named `what`) beside `key`'s under the same
/// deployment intent group: a group has one policy of each kind.
async fn one_each(
    store: &dyn ResourceStore,
    key: &ResourceKey,
    child: &str,
    what: &str,
) -> Result<()> {
    let dig = key.parent().unwrap_or_default();
    let others = store.list(&dig, child, &[]).await?;
    if let Some((other, _)) = others.iter().find(|(k, _)| k != key) {
        return Err(Error::conflict(format!(
            "the deployment intent group has {what} {:?} already: one each",
            other.name().unwrap_or_default()
        )));
    }
    Ok(())
}

/// Drift policies: one per deployment intent group.
#[derive(Debug, Clone, Copy, Default)]
pub struct DriftPolicyHook;

#[async_trait]
impl Hook<DriftPolicy> for DriftPolicyHook {
    async fn before_write(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        _: &DriftPolicy,
    ) -> Result<()> {
        one_each(store, key, keys::DRIFT_POLICY, "drift policy").await
    }
}

/// Rollout policies: one per deployment intent group, and the clusters a wave names
/// (`provider+cluster`) must be registered; whether they are placed is known at instantiate and
/// update, which refuse a wave that matches no placed cluster.
#[derive(Debug, Clone, Copy, Default)]
pub struct RolloutPolicyHook;

#[async_trait]
impl Hook<RolloutPolicy> for RolloutPolicyHook {
    async fn before_write(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        policy: &RolloutPolicy,
    ) -> Result<()> {
        one_each(store, key, keys::ROLLOUT_POLICY, "rollout policy").await?;
        for (i, wave) in policy.spec.waves.iter().enumerate() {
            for c in &wave.clusters {
                if let Some((provider, cluster)) = emco_core::ClusterRef::split(c)
                    && store
                        .get(&keys::cluster(provider, cluster))
                        .await?
                        .is_none()
                {
                    return Err(Error::invalid(format!("cluster {c} is not registered"))
                        .with_field(format!("spec.waves[{i}].clusters")));
                }
            }
        }
        Ok(())
    }
}

/// Cluster quotas: none on an admin (level 0) logical cloud, as dcm refuses them
/// (src/dcm/pkg/module/quota.go `CreateQuota`).
#[derive(Debug, Clone, Copy, Default)]
pub struct QuotaHook;

#[async_trait]
impl Hook<ClusterQuota> for QuotaHook {
    async fn before_write(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        _: &ClusterQuota,
    ) -> Result<()> {
        let Some(cloud) = key.parent() else {
            return Ok(());
        };
        let Some(value) = store.get(&cloud).await? else {
            // A missing logical cloud is the store's answer.
            return Ok(());
        };
        let cloud: LogicalCloud = emco_go::json::from_value(&value)
            .map_err(|e| Error::internal("a stored logical cloud is malformed").with_source(e))?;
        if cloud.is_admin() {
            return Err(Error::invalid(
                "Cluster Quotas not allowed for Logical Cloud Level 0",
            ));
        }
        Ok(())
    }
}

/// Logical clouds: EMCO's defaults (level "1", user type "certificate") are filled in; a
/// deployed cloud cannot be deleted, and a deleted cloud's AppContexts are deleted with it.
#[derive(Debug, Clone)]
pub struct LogicalCloudHook {
    owned: OwnedContexts,
}

#[async_trait]
impl Hook<LogicalCloud> for LogicalCloudHook {
    fn prepare(&self, value: &mut LogicalCloud) {
        value.apply_defaults();
    }

    /// A deployed cloud must be terminated first (as in EMCO's dcm); its contexts go with it.
    async fn before_delete(&self, store: &dyn ResourceStore, key: &ResourceKey) -> Result<()> {
        let state = load_state(store, key).await.found()?.unwrap_or_default();
        let what = format!("logical cloud {:?}", key.name().unwrap_or_default());
        let now = state.current_state();
        if now.is_deployed() {
            // src/dcm/api/apierrors.go, for dcm's `Delete` of an instantiated cloud.
            return Err(Error::conflict(
                "The Logical Cloud is instantiated, please terminate first",
            ));
        }
        OwnedContexts::refuse_running(&what, self.owned.current_status(&state).await?)?;
        self.owned.doom(key, &state)?;
        Ok(())
    }

    async fn after_delete(&self, _: &dyn ResourceStore, key: &ResourceKey) -> Result<()> {
        self.owned.delete_doomed(key).await
    }
}

/// The status of `state`'s current context in `contexts`; `None` when it has none or it is gone.
///
/// # Errors
/// The stores' errors; Internal for a record naming no context id.
pub(crate) async fn current_status(
    contexts: &Arc<dyn AppContextStore>,
    state: &StateInfo,
) -> Result<Option<AppContextStatus>> {
    let Some(id) = state.current_context_id()? else {
        return Ok(None);
    };
    match AppContext::load(Arc::clone(contexts), id).await.found()? {
        Some(ctx) => ctx.status().await,
        None => Ok(None),
    }
}
