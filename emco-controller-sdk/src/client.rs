//! The orchestrator's side: calling the registered controllers of a DIG in priority order.
//!
//! A registered controller (`/controllers`) is called over gRPC at its `host:port`, unless a
//! controller of the same name was registered in-process, which is then called directly through
//! the same trait (how the built-in controllers run inside emco-server by default). One tonic
//! channel is kept per address and reused; every call has a timeout; every error names the
//! controller and where it was called.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use emco_core::model::{Controller, ControllerKind};
use emco_core::{ContextId, Error, Result};
use emco_proto::contextupdate_client::ContextupdateClient;
use emco_proto::placement_controller_client::PlacementControllerClient;
use emco_proto::{ContextUpdateRequest, PostEventRequest, ResourceRequest, TerminateRequest};
use emco_runtime::metrics::{Counter, Family, Histogram, LATENCY_BUCKETS};
use tonic::transport::{Channel, Endpoint};

use crate::controller::{
    ActionController, ActionRunner, Event, PlacementController, PlacementRunner, Stores,
};
use crate::groups::GroupsLink;
use crate::server::event_to_wire;

/// Default time one controller call may take.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Default time to establish a connection to a controller.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a controller is called.
#[derive(Clone)]
enum Target {
    Remote { address: String },
    Action(ActionRunner),
    Placement(PlacementRunner),
}

impl Target {
    fn describe(&self) -> String {
        match self {
            Self::Remote { address } => address.clone(),
            Self::Action(_) | Self::Placement(_) => "in-process".to_owned(),
        }
    }
}

/// Calls registered controllers. Cheap to share behind an `Arc`.
pub struct ControllerRegistry {
    stores: Stores,
    in_process: HashMap<String, Target>,
    channels: Mutex<HashMap<String, Channel>>,
    timeout: Duration,
    connect_timeout: Duration,
    metrics: Arc<ControllerMetrics>,
    groups: GroupsLink,
}

/// The controller calls of a registry, as Prometheus metrics.
#[derive(Debug)]
pub struct ControllerMetrics {
    /// `emco_controller_call_duration_seconds{controller,type}` (`type`: action or placement).
    pub duration: Histogram,
    /// `emco_controller_call_errors_total{controller,type,kind}`: failed calls by error kind.
    pub errors: Counter,
}

impl Default for ControllerMetrics {
    fn default() -> Self {
        Self {
            duration: Histogram::new(
                "emco_controller_call_duration_seconds",
                "Duration of calls to action and placement controllers.",
                &["controller", "type"],
                LATENCY_BUCKETS,
            ),
            errors: Counter::new(
                "emco_controller_call_errors_total",
                "Failed controller calls, by controller, type and error kind.",
                &["controller", "type", "kind"],
            ),
        }
    }
}

impl ControllerMetrics {
    /// The families, to render.
    #[must_use]
    pub fn families(&self) -> Vec<&dyn Family> {
        vec![&self.duration, &self.errors]
    }
}

impl fmt::Debug for ControllerRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&String> = self.in_process.keys().collect();
        names.sort();
        f.debug_struct("ControllerRegistry")
            .field("in_process", &names)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .finish_non_exhaustive()
    }
}

/// Which call is made on each participating controller.
#[derive(Debug, Clone, Copy)]
enum Call {
    Update,
    BeforeTerminate,
    Terminate,
    Event(Event),
}

impl ControllerRegistry {
    /// A registry whose in-process controllers work on `stores`.
    #[must_use]
    pub fn new(stores: Stores) -> Self {
        Self {
            stores,
            in_process: HashMap::new(),
            channels: Mutex::new(HashMap::new()),
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            metrics: Arc::new(ControllerMetrics::default()),
            groups: GroupsLink::default(),
        }
    }

    /// The link its in-process action controllers reach the orchestrator's [`Groups`]
    /// through, for the orchestrator to bind.
    ///
    /// [`Groups`]: crate::Groups
    #[must_use]
    pub fn groups(&self) -> &GroupsLink {
        &self.groups
    }

    /// Its calls' durations and errors.
    #[must_use]
    pub fn metrics(&self) -> &Arc<ControllerMetrics> {
        &self.metrics
    }

    /// The stores its in-process controllers work on (to build controllers that call others,
    /// such as dtc, from the same stores).
    #[must_use]
    pub fn stores(&self) -> &Stores {
        &self.stores
    }

    /// Sets how long one controller call may take.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets how long connecting to a controller may take.
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Runs the action controller registered as `name` in-process instead of over gRPC.
    #[must_use]
    pub fn with_action(mut self, name: impl Into<String>, c: Arc<dyn ActionController>) -> Self {
        let runner = ActionRunner::new(c, self.stores.clone()).with_groups(self.groups.clone());
        self.in_process.insert(name.into(), Target::Action(runner));
        self
    }

    /// Runs the placement controller registered as `name` in-process instead of over gRPC.
    #[must_use]
    pub fn with_placement(
        mut self,
        name: impl Into<String>,
        c: Arc<dyn PlacementController>,
    ) -> Self {
        let runner = PlacementRunner::new(c, self.stores.clone());
        self.in_process
            .insert(name.into(), Target::Placement(runner));
        self
    }

    /// The same controllers, the in-process ones working on `stores` instead (a preview's
    /// scratch contexts); the others are called over gRPC as before, on fresh channels.
    #[must_use]
    pub fn on_stores(&self, stores: Stores) -> Self {
        let in_process = self
            .in_process
            .iter()
            .map(|(name, target)| {
                let target = match target {
                    Target::Action(r) => Target::Action(r.on_stores(stores.clone())),
                    Target::Placement(r) => Target::Placement(r.on_stores(stores.clone())),
                    Target::Remote { address } => Target::Remote {
                        address: address.clone(),
                    },
                };
                (name.clone(), target)
            })
            .collect();
        Self {
            stores,
            in_process,
            channels: Mutex::new(HashMap::new()),
            timeout: self.timeout,
            connect_timeout: self.connect_timeout,
            metrics: Arc::clone(&self.metrics),
            groups: self.groups.clone(),
        }
    }

    /// The controllers taking part for `intents` (placement and action) that are called over
    /// gRPC: they read contexts from the shared AppContext store, not from this process.
    #[must_use]
    pub fn remote_participants(
        &self,
        controllers: &[Controller],
        intents: &BTreeMap<String, String>,
    ) -> Vec<String> {
        [ControllerKind::Placement, ControllerKind::Action]
            .into_iter()
            .flat_map(|kind| Self::participants(controllers, intents, kind))
            .filter(|c| matches!(self.target(c), Target::Remote { .. }))
            .map(|c| c.metadata.name.clone())
            .collect()
    }

    fn target(&self, c: &Controller) -> Target {
        self.in_process
            .get(&c.metadata.name)
            .cloned()
            .unwrap_or_else(|| Target::Remote {
                address: format!("{}:{}", c.spec.host, c.spec.port),
            })
    }

    /// The cached channel to `address`, created lazily (the connection is made on first use and
    /// re-made by tonic when it drops).
    fn channel(&self, address: &str) -> Result<Channel> {
        let mut channels = self
            .channels
            .lock()
            .map_err(|_| Error::internal("the controller channel cache is poisoned"))?;
        if let Some(ch) = channels.get(address) {
            return Ok(ch.clone());
        }
        let endpoint = Endpoint::from_shared(format!("http://{address}"))
            .map_err(|e| Error::invalid(format!("has a bad address {address}")).with_source(e))?
            .connect_timeout(self.connect_timeout);
        let ch = endpoint.connect_lazy();
        channels.insert(address.to_owned(), ch.clone());
        Ok(ch)
    }

    /// The controllers of `kind` that take part: those named in the DIG's intents (`spec.intent`,
    /// controller name -> intent name), in ascending priority, ties by name.
    #[must_use]
    pub fn participants<'a>(
        controllers: &'a [Controller],
        intents: &BTreeMap<String, String>,
        kind: ControllerKind,
    ) -> Vec<&'a Controller> {
        let mut chosen: Vec<&Controller> = controllers
            .iter()
            .filter(|c| c.kind() == Some(kind) && intents.contains_key(&c.metadata.name))
            .collect();
        chosen.sort_by(|a, b| {
            (a.spec.priority, &a.metadata.name).cmp(&(b.spec.priority, &b.metadata.name))
        });
        chosen
    }

    /// Calls the placement controllers, then the action controllers, of the DIG whose intents
    /// are `intents` on context `context_id`; `update_from` is the replaced context on an update.
    /// Stops at the first controller that fails. The orchestrator calls the two phases
    /// separately ([`place`](Self::place), [`act`](Self::act)) to drop the extra clusters of
    /// anyOf groups in between.
    ///
    /// # Errors
    /// `FailedPrecondition` naming the controller when it refused, `Unavailable` when it could
    /// not be reached or timed out.
    pub async fn invoke(
        &self,
        controllers: &[Controller],
        intents: &BTreeMap<String, String>,
        context_id: ContextId,
        update_from: Option<ContextId>,
    ) -> Result<()> {
        self.place(controllers, intents, context_id).await?;
        self.act(controllers, intents, context_id, update_from)
            .await
    }

    /// Calls the placement controllers of the DIG whose intents are `intents` on context
    /// `context_id`, in priority order; they remove clusters from the context.
    ///
    /// # Errors
    /// As [`invoke`](Self::invoke).
    pub async fn place(
        &self,
        controllers: &[Controller],
        intents: &BTreeMap<String, String>,
        context_id: ContextId,
    ) -> Result<()> {
        for c in Self::participants(controllers, intents, ControllerKind::Placement) {
            self.filter_clusters(c, context_id).await?;
        }
        Ok(())
    }

    /// Calls the action controllers of the DIG whose intents are `intents` on context
    /// `context_id`, in priority order, each with its intent; `update_from` is the replaced
    /// context on an update.
    ///
    /// # Errors
    /// As [`invoke`](Self::invoke).
    pub async fn act(
        &self,
        controllers: &[Controller],
        intents: &BTreeMap<String, String>,
        context_id: ContextId,
        update_from: Option<ContextId>,
    ) -> Result<()> {
        for c in Self::participants(controllers, intents, ControllerKind::Action) {
            let intent = intents.get(&c.metadata.name).map_or("", String::as_str);
            self.action(c, context_id, Call::Update, intent, update_from)
                .await?;
        }
        Ok(())
    }

    /// Tells the action controllers of the DIG that context `context_id` is terminated, in
    /// priority order.
    ///
    /// # Errors
    /// As [`invoke`](Self::invoke).
    pub async fn terminate(
        &self,
        controllers: &[Controller],
        intents: &BTreeMap<String, String>,
        context_id: ContextId,
    ) -> Result<()> {
        self.tell(controllers, intents, context_id, Call::Terminate)
            .await
    }

    /// Asks the in-process action controllers of the DIG whether context `context_id` may be
    /// terminated ([`ActionController::before_terminate`](crate::ActionController::before_terminate)),
    /// in priority order; the first refusal ends it.
    ///
    /// # Errors
    /// As [`invoke`](Self::invoke).
    pub async fn before_terminate(
        &self,
        controllers: &[Controller],
        intents: &BTreeMap<String, String>,
        context_id: ContextId,
    ) -> Result<()> {
        self.tell(controllers, intents, context_id, Call::BeforeTerminate)
            .await
    }

    /// Posts `event` for context `context_id` to the action controllers of the DIG, in priority
    /// order.
    ///
    /// # Errors
    /// As [`invoke`](Self::invoke).
    pub async fn post_event(
        &self,
        controllers: &[Controller],
        intents: &BTreeMap<String, String>,
        context_id: ContextId,
        event: Event,
    ) -> Result<()> {
        self.tell(controllers, intents, context_id, Call::Event(event))
            .await
    }

    /// Makes `call` (no intent) on the action controllers of the DIG in priority order; the
    /// first failure ends it. As EMCO's orchestrator: a controller without the call is not a
    /// failure, and the controllers after it are still told.
    async fn tell(
        &self,
        controllers: &[Controller],
        intents: &BTreeMap<String, String>,
        context_id: ContextId,
        call: Call,
    ) -> Result<()> {
        for c in Self::participants(controllers, intents, ControllerKind::Action) {
            match self.action(c, context_id, call, "", None).await {
                Err(e) if unimplemented(&e) => {
                    tracing::debug!(controller = %c.metadata.name, ?call, "it does not serve the call");
                }
                r => r?,
            }
        }
        Ok(())
    }

    /// Waits for `hold` of context `context_id` through the in-process controller that took it
    /// ([`ActionController::await_hold`](crate::ActionController::await_hold)); not bounded by
    /// the call timeout: the controller bounds its own wait.
    ///
    /// # Errors
    /// `FailedPrecondition` when no in-process action controller has the hold's name; the
    /// controller's error.
    pub async fn await_hold(
        &self,
        context_id: ContextId,
        hold: &emco_core::lifecycle::hold::Hold,
    ) -> Result<()> {
        let Some(Target::Action(runner)) = self.in_process.get(&hold.controller) else {
            return Err(Error::failed_precondition(format!(
                "no in-process action controller {:?} to wait for its hold ({})",
                hold.controller, hold.description
            )));
        };
        runner.await_hold(&context_id.to_string(), hold).await
    }

    /// Runs `call` under the timeout and turns its outcome into an error naming the controller.
    async fn guarded<F>(&self, what: &str, c: &Controller, target: &Target, call: F) -> Result<()>
    where
        F: Future<Output = Result<std::result::Result<(), Error>>>,
    {
        let name = &c.metadata.name;
        let place = target.describe();
        let started = std::time::Instant::now();
        let outcome = self.outcome(what, name, &place, call).await;
        self.metrics
            .duration
            .observe(&[name, what], started.elapsed().as_secs_f64());
        if let Err(e) = &outcome {
            self.metrics.errors.inc(&[name, what, e.kind().as_str()]);
        }
        outcome
    }

    async fn outcome<F>(&self, what: &str, name: &str, place: &str, call: F) -> Result<()>
    where
        F: Future<Output = Result<std::result::Result<(), Error>>>,
    {
        match tokio::time::timeout(self.timeout, call).await {
            Err(_) => Err(Error::unavailable(format!(
                "{what} controller {name} ({place}) timed out after {:?}",
                self.timeout
            ))),
            Ok(Err(e)) => Err(Error::new(
                e.kind(),
                format!("{what} controller {name} ({place}) {e}"),
            )
            .with_source(e)),
            Ok(Ok(Err(refusal))) => Err(Error::new(
                refusal.kind(),
                format!("{what} controller {name} ({place}) failed: {refusal}"),
            )
            .with_source(refusal)),
            Ok(Ok(Ok(()))) => Ok(()),
        }
    }

    async fn filter_clusters(&self, c: &Controller, context_id: ContextId) -> Result<()> {
        let target = self.target(c);
        let id = context_id.to_string();
        let call = async {
            match &target {
                Target::Placement(runner) => Ok(runner.filter_clusters(&id).await),
                Target::Action(_) => Err(Error::invalid(
                    "it is registered in-process as an action controller",
                )),
                Target::Remote { address } => {
                    let mut client = PlacementControllerClient::new(self.channel(address)?);
                    let resp = client
                        .filter_clusters(ResourceRequest {
                            app_context: id.clone(),
                        })
                        .await
                        .map_err(status_error)?
                        .into_inner();
                    Ok(refusal(resp.status, resp.message))
                }
            }
        };
        self.guarded("placement", c, &target, call).await
    }

    async fn action(
        &self,
        c: &Controller,
        context_id: ContextId,
        what: Call,
        intent: &str,
        update_from: Option<ContextId>,
    ) -> Result<()> {
        let target = self.target(c);
        let id = context_id.to_string();
        let from = update_from.map(|u| u.to_string()).unwrap_or_default();
        let call = async {
            match &target {
                Target::Action(runner) => Ok(match what {
                    Call::Update => runner.update(&id, intent, &from).await,
                    Call::BeforeTerminate => runner.before_terminate(&id).await,
                    Call::Terminate => runner.terminate(&id).await,
                    Call::Event(e) => runner.post_event(&id, e).await,
                }),
                Target::Placement(_) => Err(Error::invalid(
                    "it is registered in-process as a placement controller",
                )),
                Target::Remote { address } => {
                    let mut client = ContextupdateClient::new(self.channel(address)?);
                    let (ok, message) = match what {
                        Call::Update => {
                            let r = client
                                .update_app_context(ContextUpdateRequest {
                                    app_context: id.clone(),
                                    intent_name: intent.to_owned(),
                                    update_from_app_context: from.clone(),
                                })
                                .await
                                .map_err(status_error)?
                                .into_inner();
                            (r.app_context_updated, r.app_context_update_message)
                        }
                        // EMCO's protocol has no such call: a remote controller has nothing to do.
                        Call::BeforeTerminate => (true, String::new()),
                        Call::Terminate => {
                            let r = client
                                .terminate_app_context(TerminateRequest {
                                    app_context: id.clone(),
                                })
                                .await
                                .map_err(status_error)?
                                .into_inner();
                            (r.app_context_terminated, r.app_context_terminated_message)
                        }
                        Call::Event(e) => {
                            let r = client
                                .post_event(PostEventRequest {
                                    app_context: id.clone(),
                                    event_type: event_to_wire(e).into(),
                                })
                                .await
                                .map_err(status_error)?
                                .into_inner();
                            (r.success, r.post_event_message)
                        }
                    };
                    Ok(refusal(ok, message))
                }
            }
        };
        self.guarded("action", c, &target, call).await
    }
}

/// A controller's `(ok, message)` answer: a refusal keeps its message.
fn refusal(ok: bool, message: String) -> std::result::Result<(), Error> {
    if ok {
        Ok(())
    } else {
        Err(Error::failed_precondition(message))
    }
}

/// Whether `e` comes from a gRPC `Unimplemented` answer (a service or method the controller does
/// not serve).
fn unimplemented(e: &Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(status) = s.downcast_ref::<tonic::Status>() {
            return status.code() == tonic::Code::Unimplemented;
        }
        source = s.source();
    }
    false
}

/// A gRPC failure as an error: what the one mapping ([`emco_core::grpc::kind_of`]) calls
/// unavailable means unreachable; any other failure of a controller is the orchestrator's own
/// failure to complete the operation (EMCO answers it with a 500), whatever its code.
fn status_error(status: tonic::Status) -> Error {
    use tonic::Code;
    let message = status.message().to_owned();
    match status.code() {
        code if emco_core::grpc::kind_of(code) == emco_core::ErrorKind::Unavailable => {
            Error::unavailable(format!("is unreachable: {message}")).with_source(status)
        }
        Code::Unimplemented => {
            Error::failed_precondition(format!("does not serve this service: {message}"))
                .with_source(status)
        }
        _ => Error::internal(format!(
            "answered gRPC error {:?}: {message}",
            status.code()
        ))
        .with_source(status),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use emco_store::InMemoryAppContextStore;

    use super::*;

    #[tokio::test]
    async fn one_channel_per_address_is_kept() {
        let registry =
            ControllerRegistry::new(Stores::new(Arc::new(InMemoryAppContextStore::new())));
        registry.channel("127.0.0.1:9033").unwrap();
        registry.channel("127.0.0.1:9033").unwrap();
        registry.channel("127.0.0.1:9034").unwrap();
        assert_eq!(registry.channels.lock().unwrap().len(), 2);
        let err = registry.channel("bad host:1").unwrap_err();
        assert_eq!(err.kind(), emco_core::ErrorKind::InvalidArgument);
    }
}
