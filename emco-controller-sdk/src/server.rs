//! Serving a controller over EMCO's gRPC wire protocol: `contextupdate` for action controllers,
//! `PlacementController` for placement controllers, plus the standard gRPC health service.
//!
//! A controller's refusal is not a gRPC error: as in EMCO it travels in the response
//! (`app_context_updated = false` with the message), so an orchestrator written in Go or in Rust
//! shows the controller's own words.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use emco_core::{Error, Result};
use emco_proto::contextupdate_server::{Contextupdate, ContextupdateServer};
use emco_proto::placement_controller_server::{
    PlacementController as PlacementService, PlacementControllerServer,
};
use emco_proto::{
    ContextUpdateRequest, ContextUpdateResponse, EventType, PostEventRequest, PostEventResponse,
    ResourceRequest, ResourceResponse, TerminateRequest, TerminateResponse,
};
use emco_store::{AppContextStore, ResourceStore};
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::controller::{
    ActionController, ActionRunner, Event, PlacementController, PlacementRunner, Stores,
};

/// Logs the outcome of a call and turns it into EMCO's `(ok, message)` pair.
fn outcome(method: &str, result: Result<()>) -> (bool, String) {
    match result {
        Ok(()) => {
            tracing::info!(method, "done");
            (true, String::new())
        }
        Err(e) => {
            tracing::warn!(method, error = %e, "refused");
            (false, e.to_string())
        }
    }
}

/// The `contextupdate` service over an [`ActionRunner`].
#[derive(Debug, Clone)]
pub struct ActionService {
    name: Arc<str>,
    runner: ActionRunner,
}

impl ActionService {
    /// The service of `runner`; `name` labels its log spans.
    #[must_use]
    pub fn new(name: &str, runner: ActionRunner) -> Self {
        Self {
            name: name.into(),
            runner,
        }
    }
}

#[tonic::async_trait]
impl Contextupdate for ActionService {
    async fn update_app_context(
        &self,
        request: Request<ContextUpdateRequest>,
    ) -> std::result::Result<Response<ContextUpdateResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("UpdateAppContext", controller = %self.name,
            app_context = %req.app_context, intent = %req.intent_name);
        let result = self
            .runner
            .update(
                &req.app_context,
                &req.intent_name,
                &req.update_from_app_context,
            )
            .instrument(span.clone())
            .await;
        let (ok, message) = span.in_scope(|| outcome("UpdateAppContext", result));
        Ok(Response::new(ContextUpdateResponse {
            app_context_updated: ok,
            app_context_update_message: message,
        }))
    }

    async fn terminate_app_context(
        &self,
        request: Request<TerminateRequest>,
    ) -> std::result::Result<Response<TerminateResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("TerminateAppContext", controller = %self.name,
            app_context = %req.app_context);
        let result = self
            .runner
            .terminate(&req.app_context)
            .instrument(span.clone())
            .await;
        let (ok, message) = span.in_scope(|| outcome("TerminateAppContext", result));
        Ok(Response::new(TerminateResponse {
            app_context_terminated: ok,
            app_context_terminated_message: message,
        }))
    }

    async fn post_event(
        &self,
        request: Request<PostEventRequest>,
    ) -> std::result::Result<Response<PostEventResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("PostEvent", controller = %self.name,
            app_context = %req.app_context, event = req.event_type);
        let result = match EventType::try_from(req.event_type) {
            Ok(event) => {
                self.runner
                    .post_event(&req.app_context, event_from_wire(event))
                    .instrument(span.clone())
                    .await
            }
            Err(_) => Err(Error::invalid(format!(
                "unknown event type {}",
                req.event_type
            ))),
        };
        let (ok, message) = span.in_scope(|| outcome("PostEvent", result));
        Ok(Response::new(PostEventResponse {
            success: ok,
            post_event_message: message,
        }))
    }
}

/// EMCO's wire enum as the SDK's [`Event`].
#[must_use]
pub fn event_from_wire(event: EventType) -> Event {
    match event {
        EventType::Instantiate => Event::Instantiate,
        EventType::Terminate => Event::Terminate,
        EventType::Update => Event::Update,
    }
}

/// The SDK's [`Event`] as EMCO's wire enum.
#[must_use]
pub fn event_to_wire(event: Event) -> EventType {
    match event {
        Event::Instantiate => EventType::Instantiate,
        Event::Terminate => EventType::Terminate,
        Event::Update => EventType::Update,
    }
}

/// The `PlacementController` service over a [`PlacementRunner`].
#[derive(Debug, Clone)]
pub struct PlacementServiceImpl {
    name: Arc<str>,
    runner: PlacementRunner,
}

impl PlacementServiceImpl {
    /// The service of `runner`; `name` labels its log spans.
    #[must_use]
    pub fn new(name: &str, runner: PlacementRunner) -> Self {
        Self {
            name: name.into(),
            runner,
        }
    }
}

#[tonic::async_trait]
impl PlacementService for PlacementServiceImpl {
    async fn filter_clusters(
        &self,
        request: Request<ResourceRequest>,
    ) -> std::result::Result<Response<ResourceResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("FilterClusters", controller = %self.name,
            app_context = %req.app_context);
        let result = self
            .runner
            .filter_clusters(&req.app_context)
            .instrument(span.clone())
            .await;
        let (ok, message) = span.in_scope(|| outcome("FilterClusters", result));
        Ok(Response::new(ResourceResponse {
            app_context: req.app_context,
            status: ok,
            message,
        }))
    }
}

/// Entry point of the gRPC server builder.
#[derive(Debug, Clone, Copy)]
pub struct Server;

impl Server {
    /// A builder serving controllers that work on the AppContexts of `store` (etcd when the
    /// orchestrator uses etcd, otherwise the orchestrator's AppContext gRPC service).
    #[must_use]
    pub fn builder(store: Arc<dyn AppContextStore>) -> ServerBuilder {
        ServerBuilder {
            name: "controller".to_owned(),
            stores: Stores::new(store),
            action: None,
            placement: None,
        }
    }
}

#[cfg(feature = "rest")]
impl Server {
    /// Runs controller `name` beside an orchestrator as EMCO's controllers run: on its stores
    /// (AppContexts in etcd, `EMCO_ETCD_*`; resources in MongoDB, `EMCO_MONGO_*`), with `routes`
    /// (its intents' REST routes over the resource store, such as `MyIntent::routes`) served on
    /// `rest` and the controller `serving` adds to the builder on `grpc`, until Ctrl-C, when the
    /// calls in flight are finished first.
    ///
    /// # Errors
    /// The stores' when they cannot be reached; `Unavailable` when an address cannot be bound
    /// or a server fails.
    pub async fn run_from_env(
        name: &str,
        rest: SocketAddr,
        grpc: SocketAddr,
        routes: fn(Arc<dyn ResourceStore>) -> axum::Router,
        serving: impl FnOnce(ServerBuilder) -> ServerBuilder,
    ) -> Result<()> {
        let contexts = emco_store::etcd::EtcdBuilder::from_env().build().await?;
        let resources: Arc<dyn ResourceStore> =
            Arc::new(emco_store::mongo::MongoBuilder::from_env().build().await?);
        let listener = TcpListener::bind(rest)
            .await
            .map_err(|e| Error::unavailable(format!("cannot listen on {rest}")).with_source(e))?;
        let app = routes(Arc::clone(&resources));
        let stop = tokio_util::sync::CancellationToken::new();
        let rest_stop = stop.clone();
        let rest_server = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(rest_stop.cancelled_owned())
                .await
        });
        let builder = Self::builder(Arc::new(contexts))
            .name(name)
            .resources(resources);
        let served = serving(builder)
            .serve(grpc, async { drop(tokio::signal::ctrl_c().await) })
            .await;
        stop.cancel();
        let rest_served = rest_server
            .await
            .map_err(|e| Error::internal("the REST server's task failed").with_source(e))?;
        served?;
        rest_served.map_err(|e| Error::unavailable("the REST server failed").with_source(e))
    }
}

/// Builds and runs a controller's gRPC server. See [`Server::builder`].
#[derive(Debug)]
pub struct ServerBuilder {
    name: String,
    stores: Stores,
    action: Option<ActionRunner>,
    placement: Option<PlacementRunner>,
}

impl ServerBuilder {
    /// Names the controller in logs (default `controller`).
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The resource store the controllers read their intents from.
    #[must_use]
    pub fn resources(mut self, store: Arc<dyn ResourceStore>) -> Self {
        self.stores = self.stores.with_resources(store);
        self
    }

    /// The resource synchronizer the controllers deploy contexts of their own with and read
    /// clusters through (call before [`Self::action`]).
    #[must_use]
    pub fn deployer(mut self, deployer: Arc<dyn crate::Deployer>) -> Self {
        self.stores = self.stores.with_deployer(deployer);
        self
    }

    /// Serves `controller` as the action controller (`contextupdate`).
    #[must_use]
    pub fn action(self, controller: impl ActionController) -> Self {
        self.action_arc(Arc::new(controller))
    }

    /// Like [`action`](Self::action), for a shared controller.
    #[must_use]
    pub fn action_arc(mut self, controller: Arc<dyn ActionController>) -> Self {
        self.action = Some(ActionRunner::new(controller, self.stores.clone()));
        self
    }

    /// Serves `controller` as the placement controller (`PlacementController`).
    #[must_use]
    pub fn placement(self, controller: impl PlacementController) -> Self {
        self.placement_arc(Arc::new(controller))
    }

    /// Like [`placement`](Self::placement), for a shared controller.
    #[must_use]
    pub fn placement_arc(mut self, controller: Arc<dyn PlacementController>) -> Self {
        self.placement = Some(PlacementRunner::new(controller, self.stores.clone()));
        self
    }

    /// Binds `addr` and serves until `shutdown` completes; in-flight calls are finished first.
    ///
    /// # Errors
    /// `Unavailable` when the address cannot be bound or the server fails;
    /// `FailedPrecondition` when no controller was given.
    pub async fn serve(
        self,
        addr: SocketAddr,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<()> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| Error::unavailable(format!("cannot listen on {addr}")).with_source(e))?;
        self.serve_with_listener(listener, shutdown).await
    }

    /// Serves on an already bound listener (port 0 in tests) until `shutdown` completes.
    ///
    /// # Errors
    /// As [`serve`](Self::serve).
    pub async fn serve_with_listener(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<()> {
        if self.action.is_none() && self.placement.is_none() {
            return Err(Error::failed_precondition(
                "a controller server needs an action or a placement controller",
            ));
        }
        let (reporter, health) = tonic_health::server::health_reporter();
        let mut router = tonic::transport::Server::builder().add_service(health);
        if let Some(runner) = self.action {
            reporter
                .set_serving::<ContextupdateServer<ActionService>>()
                .await;
            router = router.add_service(ContextupdateServer::new(ActionService::new(
                &self.name, runner,
            )));
        }
        if let Some(runner) = self.placement {
            reporter
                .set_serving::<PlacementControllerServer<PlacementServiceImpl>>()
                .await;
            router = router.add_service(PlacementControllerServer::new(PlacementServiceImpl::new(
                &self.name, runner,
            )));
        }
        if let Ok(addr) = listener.local_addr() {
            tracing::info!(controller = %self.name, %addr, "serving");
        }
        router
            .serve_with_incoming_shutdown(TcpIncoming::from(listener), shutdown)
            .await
            .map_err(|e| Error::unavailable("the controller's gRPC server failed").with_source(e))
    }
}
