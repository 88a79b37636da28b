//! The controller traits, the context they are given, and the in-process runner that calls them.
//!
//! The runner is the single place where a request (context id, intent name, update-from id)
//! becomes a call on a controller: the gRPC services of [`crate::server`] and the in-process
//! path of [`crate::client`] both go through it, so a controller behaves the same either way.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use async_trait::async_trait;
pub use emco_appcontext::{Deployer, ObjectRef, Stores};
use emco_core::{ContextId, Error, ErrorKind, Result};
use emco_store::ResourceStore;

use crate::groups::{Groups, GroupsLink};
use crate::handle::ContextHandle;

/// The lifecycle event an action controller is told about (`PostEvent`), numbered as EMCO's
/// `EventType` enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// The context is being instantiated.
    Instantiate,
    /// The context is being terminated.
    Terminate,
    /// The context replaces another one.
    Update,
}

/// An action controller: changes an AppContext before rsync applies it (adds resources, patches
/// them), and may react to terminate and lifecycle events.
///
/// Used as `Arc<dyn ActionController>`.
#[async_trait]
pub trait ActionController: Send + Sync + 'static {
    /// Updates the context for the intent `cx.intent_name()` (`UpdateAppContext`). Changes made
    /// through `cx` are committed only when this returns `Ok`.
    ///
    /// # Errors
    /// Any error aborts the orchestrator's operation with the error's message.
    async fn update(&self, cx: &mut ControllerContext) -> Result<()>;

    /// Called when the context is terminated (`TerminateAppContext`). Most controllers only
    /// change the context before it is applied and have nothing to undo, so the default does
    /// nothing.
    ///
    /// # Errors
    /// Any error is reported to the orchestrator.
    async fn terminate(&self, cx: &mut ControllerContext) -> Result<()> {
        let _ = cx;
        Ok(())
    }

    /// Called before the group of the context is terminated, in-process only (EMCO's protocol
    /// has no such call): an error refuses the terminate, so a controller can run what must
    /// happen while the deployment is still there (tac's pre-termination hooks). The default
    /// does nothing.
    ///
    /// # Errors
    /// Any error refuses the terminate with the error's message.
    async fn before_terminate(&self, cx: &mut ControllerContext) -> Result<()> {
        let _ = cx;
        Ok(())
    }

    /// Waits until `hold`, one this controller took with [`ControllerContext::hold`], is done
    /// (in-process only); the context is handed to rsync once every hold is. Called again by
    /// the next process when this one dies while waiting, so it must be safe to repeat. The
    /// default has nothing to wait for.
    ///
    /// # Errors
    /// Any error fails the hold: the context is not handed over, and its status says why.
    async fn await_hold(
        &self,
        cx: &mut ControllerContext,
        hold: &emco_core::lifecycle::hold::Hold,
    ) -> Result<()> {
        let _ = (cx, hold);
        Ok(())
    }

    /// Called on a lifecycle event of the context (`PostEvent`); the default ignores events.
    ///
    /// # Errors
    /// Any error is reported to the orchestrator.
    async fn post_event(&self, cx: &mut ControllerContext, event: Event) -> Result<()> {
        let _ = (cx, event);
        Ok(())
    }
}

/// A placement controller: removes clusters an app must not go to (`FilterClusters`).
///
/// Used as `Arc<dyn PlacementController>`.
#[async_trait]
pub trait PlacementController: Send + Sync + 'static {
    /// Filters the clusters of the apps of the context, typically with
    /// [`ContextHandle::remove_cluster`]. Changes are committed only when this returns `Ok`.
    ///
    /// # Errors
    /// Any error aborts the orchestrator's operation with the error's message.
    async fn filter_clusters(&self, cx: &mut ControllerContext) -> Result<()>;
}

/// What a controller method is given: the context (through [`ContextHandle`], which this derefs
/// to), the intent the DIG names for this controller, the context being replaced on an update,
/// and the resource store holding the controller's intents.
#[derive(Debug)]
pub struct ControllerContext {
    handle: ContextHandle,
    intent_name: Option<String>,
    update_from: Option<ContextId>,
    resources: Option<Arc<dyn ResourceStore>>,
    deployer: Option<Arc<dyn Deployer>>,
    groups: GroupsLink,
}

impl ControllerContext {
    /// A context for a call on `handle`.
    #[must_use]
    pub fn new(handle: ContextHandle) -> Self {
        Self {
            handle,
            intent_name: None,
            update_from: None,
            resources: None,
            deployer: None,
            groups: GroupsLink::default(),
        }
    }

    /// Sets the intent name the DIG gives this controller.
    #[must_use]
    pub fn with_intent_name(mut self, name: impl Into<String>) -> Self {
        self.intent_name = Some(name.into()).filter(|n: &String| !n.is_empty());
        self
    }

    /// Sets the context an update replaces.
    #[must_use]
    pub fn with_update_from(mut self, id: Option<ContextId>) -> Self {
        self.update_from = id;
        self
    }

    /// Sets the resource store the controller's intents are read from.
    #[must_use]
    pub fn with_resource_store(mut self, store: Option<Arc<dyn ResourceStore>>) -> Self {
        self.resources = store;
        self
    }

    /// Sets the resource synchronizer the controller may deploy contexts of its own with.
    #[must_use]
    pub fn with_deployer(mut self, deployer: Option<Arc<dyn Deployer>>) -> Self {
        self.deployer = deployer;
        self
    }

    /// Sets the link to the orchestrator's [`Groups`].
    #[must_use]
    pub fn with_groups(mut self, groups: GroupsLink) -> Self {
        self.groups = groups;
        self
    }

    /// The orchestrator's lifecycle of deployment intent groups, to deploy other groups with.
    ///
    /// # Errors
    /// FailedPrecondition for a controller served alone (see [`GroupsLink::get`]).
    pub fn groups(&self) -> Result<Arc<dyn Groups>> {
        self.groups.get()
    }

    /// The handle on the context.
    #[must_use]
    pub fn handle(&self) -> &ContextHandle {
        &self.handle
    }

    /// The handle on the context, to stage changes.
    pub fn handle_mut(&mut self) -> &mut ContextHandle {
        &mut self.handle
    }

    /// The intent name the DIG gives this controller (empty on the wire means none).
    #[must_use]
    pub fn intent_name(&self) -> Option<&str> {
        self.intent_name.as_deref()
    }

    /// The context an update or migrate replaces.
    #[must_use]
    pub fn update_from(&self) -> Option<ContextId> {
        self.update_from
    }

    /// The resource store holding the onboarded objects and the controller's intents.
    ///
    /// # Errors
    /// `FailedPrecondition` when the controller was started without one.
    pub fn resource_store(&self) -> Result<&Arc<dyn ResourceStore>> {
        self.resources.as_ref().ok_or_else(|| {
            Error::failed_precondition("this controller was started without a resource store")
        })
    }

    /// The resource synchronizer: deploys contexts the controller builds itself, reads
    /// clusters live.
    ///
    /// # Errors
    /// `FailedPrecondition` when the controller was started without one.
    pub fn deployer(&self) -> Result<&Arc<dyn Deployer>> {
        self.deployer.as_ref().ok_or_else(|| {
            Error::failed_precondition(
                "this controller was started without a resource synchronizer",
            )
        })
    }

    /// Whether this call builds a preview's scratch context: the controller should then change
    /// nothing outside the context (start no workflow, call no outside system).
    #[must_use]
    pub fn previewing(&self) -> bool {
        self.deployer.as_ref().is_some_and(|d| d.read_only())
    }

    /// Holds the context's hand-over to rsync (ours, in-process controllers only): the
    /// orchestrator records the operation, then calls `controller`'s
    /// [`ActionController::await_hold`] with this hold, and hands the context over once every
    /// hold is released; a hold that fails keeps it from the clusters. The hold is in the
    /// context, so a process that dies while waiting leaves it to the next.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn hold(
        &self,
        controller: &str,
        what: serde_json::Value,
        description: impl Into<String>,
    ) -> Result<()> {
        use emco_core::lifecycle::hold::{Hold, Holds};
        let ctx = self.handle.app_context();
        let hold = Hold {
            controller: controller.to_owned(),
            what,
            description: description.into(),
            ..Hold::default()
        };
        loop {
            let (mut holds, revision) = ctx.holds::<Holds>().await?.unwrap_or_default();
            holds.holds.push(hold.clone());
            match ctx.put_holds(&holds, revision).await {
                Err(e) if e.kind() == ErrorKind::Conflict => {}
                done => return done.map(drop),
            }
        }
    }

    /// The stores this call works on (the context's, the resource store, the synchronizer): to
    /// call other controllers on the same context, as dtc calls its sub-controllers, also when
    /// that context is a preview's scratch one.
    #[must_use]
    pub fn stores(&self) -> Stores {
        Stores {
            appcontext: Arc::clone(self.handle.app_context().store()),
            resources: self.resources.clone(),
            deployer: self.deployer.clone(),
        }
    }

    /// Gives the handle back, with whatever it has staged.
    #[must_use]
    pub fn into_handle(self) -> ContextHandle {
        self.handle
    }
}

impl Deref for ControllerContext {
    type Target = ContextHandle;

    fn deref(&self) -> &ContextHandle {
        &self.handle
    }
}

impl DerefMut for ControllerContext {
    fn deref_mut(&mut self) -> &mut ContextHandle {
        &mut self.handle
    }
}

/// Opens context `context_id` for a controller call over `stores`.
async fn open(
    stores: &Stores,
    context_id: ContextId,
    intent_name: &str,
    update_from: Option<ContextId>,
) -> Result<ControllerContext> {
    let handle = ContextHandle::load(Arc::clone(&stores.appcontext), context_id).await?;
    Ok(ControllerContext::new(handle)
        .with_intent_name(intent_name)
        .with_update_from(update_from)
        .with_resource_store(stores.resources.clone())
        .with_deployer(stores.deployer.clone()))
}

impl ActionRunner {
    /// Opens `context_id` for a call of this runner's controller.
    async fn open(
        &self,
        context_id: ContextId,
        intent_name: &str,
        update_from: Option<ContextId>,
    ) -> Result<ControllerContext> {
        Ok(open(&self.stores, context_id, intent_name, update_from)
            .await?
            .with_groups(self.groups.clone()))
    }
}

/// Runs an action controller in-process: opens the context, calls the controller, commits what
/// it staged when it succeeded.
#[derive(Clone)]
pub struct ActionRunner {
    controller: Arc<dyn ActionController>,
    stores: Stores,
    groups: GroupsLink,
}

impl fmt::Debug for ActionRunner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActionRunner")
            .field("stores", &self.stores)
            .finish_non_exhaustive()
    }
}

impl ActionRunner {
    /// A runner of `controller` over `stores`.
    #[must_use]
    pub fn new(controller: Arc<dyn ActionController>, stores: Stores) -> Self {
        Self {
            controller,
            stores,
            groups: GroupsLink::default(),
        }
    }

    /// Gives the controller the orchestrator's [`Groups`] through `groups`.
    #[must_use]
    pub fn with_groups(mut self, groups: GroupsLink) -> Self {
        self.groups = groups;
        self
    }

    /// The same controller over other stores.
    #[must_use]
    pub fn on_stores(&self, stores: Stores) -> Self {
        Self::new(Arc::clone(&self.controller), stores).with_groups(self.groups.clone())
    }

    /// `UpdateAppContext` for the context `app_context` (decimal id), the DIG's `intent_name` and,
    /// on an update, the replaced context `update_from` (empty when none).
    ///
    /// # Errors
    /// `InvalidArgument` for a bad id; the controller's and the store's errors.
    pub async fn update(
        &self,
        app_context: &str,
        intent_name: &str,
        update_from: &str,
    ) -> Result<()> {
        let id = ContextId::required_from_wire("app_context", app_context)?;
        let from = ContextId::from_wire("update_from_appContext", update_from)?;
        let mut cx = self.open(id, intent_name, from).await?;
        self.controller.update(&mut cx).await?;
        cx.handle_mut().commit().await
    }

    /// `TerminateAppContext` for the context `app_context`.
    ///
    /// # Errors
    /// `InvalidArgument` for a bad id; the controller's and the store's errors.
    pub async fn terminate(&self, app_context: &str) -> Result<()> {
        let id = ContextId::required_from_wire("app_context", app_context)?;
        let mut cx = self.open(id, "", None).await?;
        self.controller.terminate(&mut cx).await?;
        cx.handle_mut().commit().await
    }

    /// [`ActionController::before_terminate`] for the context `app_context`.
    ///
    /// # Errors
    /// `InvalidArgument` for a bad id; the controller's and the store's errors.
    pub async fn before_terminate(&self, app_context: &str) -> Result<()> {
        let id = ContextId::required_from_wire("app_context", app_context)?;
        let mut cx = self.open(id, "", None).await?;
        self.controller.before_terminate(&mut cx).await?;
        cx.handle_mut().commit().await
    }

    /// [`ActionController::await_hold`] of `hold` for the context `app_context`.
    ///
    /// # Errors
    /// `InvalidArgument` for a bad id; the controller's and the store's errors.
    pub async fn await_hold(
        &self,
        app_context: &str,
        hold: &emco_core::lifecycle::hold::Hold,
    ) -> Result<()> {
        let id = ContextId::required_from_wire("app_context", app_context)?;
        let mut cx = self.open(id, "", None).await?;
        self.controller.await_hold(&mut cx, hold).await
    }

    /// `PostEvent` for the context `app_context`.
    ///
    /// # Errors
    /// `InvalidArgument` for a bad id; the controller's and the store's errors.
    pub async fn post_event(&self, app_context: &str, event: Event) -> Result<()> {
        let id = ContextId::required_from_wire("app_context", app_context)?;
        let mut cx = self.open(id, "", None).await?;
        self.controller.post_event(&mut cx, event).await?;
        cx.handle_mut().commit().await
    }
}

/// Runs a placement controller in-process, like [`ActionRunner`].
#[derive(Clone)]
pub struct PlacementRunner {
    controller: Arc<dyn PlacementController>,
    stores: Stores,
}

impl fmt::Debug for PlacementRunner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlacementRunner")
            .field("stores", &self.stores)
            .finish_non_exhaustive()
    }
}

impl PlacementRunner {
    /// A runner of `controller` over `stores`.
    #[must_use]
    pub fn new(controller: Arc<dyn PlacementController>, stores: Stores) -> Self {
        Self { controller, stores }
    }

    /// The same controller over other stores.
    #[must_use]
    pub fn on_stores(&self, stores: Stores) -> Self {
        Self::new(Arc::clone(&self.controller), stores)
    }

    /// `FilterClusters` for the context `app_context` (decimal id).
    ///
    /// # Errors
    /// `InvalidArgument` for a bad id; the controller's and the store's errors.
    pub async fn filter_clusters(&self, app_context: &str) -> Result<()> {
        let id = ContextId::required_from_wire("appContext", app_context)?;
        let mut cx = open(&self.stores, id, "", None).await?;
        self.controller.filter_clusters(&mut cx).await?;
        cx.handle_mut().commit().await
    }
}
