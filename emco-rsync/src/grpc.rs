//! EMCO's rsync gRPC services, `installapp`, `updateapp` and `readyNotify` (EMCO.md section 8),
//! served from the library: [`Rsync::grpc_services`] returns the tonic servers for any
//! `tonic::transport::Server` to mount.
//!
//! As in EMCO, a request that cannot be queued is answered with `false` and a message rather
//! than a gRPC error; a context id that is not a number is a gRPC `InvalidArgument`.

use emco_core::poison::lock;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use emco_core::{ContextId, Error};
use emco_proto::installapp_server::{Installapp, InstallappServer};
use emco_proto::ready_notify_server::{ReadyNotify, ReadyNotifyServer};
use emco_proto::updateapp_server::{Updateapp, UpdateappServer};
use emco_proto::{
    InstallAppRequest, InstallAppResponse, Notification, ReadAppContextRequest,
    ReadAppContextResponse, RollbackAppRequest, RollbackAppResponse, Topic, UninstallAppRequest,
    UninstallAppResponse, UnsubscribeResponse, UpdateAppRequest, UpdateAppResponse,
};
use futures::Stream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::engine::Rsync;

/// The name rsync gives itself in readiness notifications.
pub const SERVER_NAME: &str = "rsync";

/// The tonic servers of rsync's gRPC services.
#[derive(Debug)]
pub struct GrpcServices {
    /// `installapp`: InstallApp, UninstallApp, ReadAppContext.
    pub installapp: InstallappServer<RsyncService>,
    /// `updateapp`: UpdateApp, RollbackApp.
    pub updateapp: UpdateappServer<RsyncService>,
    /// `readyNotify`: Alert, Unsubscribe.
    pub ready_notify: ReadyNotifyServer<RsyncService>,
}

impl Rsync {
    /// The gRPC services, sharing this engine.
    #[must_use]
    pub fn grpc_services(&self) -> GrpcServices {
        let service = RsyncService {
            rsync: self.clone(),
            subscriptions: Arc::new(Mutex::new(HashMap::new())),
        };
        GrpcServices {
            installapp: InstallappServer::new(service.clone()),
            updateapp: UpdateappServer::new(service.clone()),
            ready_notify: ReadyNotifyServer::new(service),
        }
    }
}

/// The implementation of rsync's gRPC services.
#[derive(Debug, Clone)]
pub struct RsyncService {
    rsync: Rsync,
    /// Open `Alert` streams by (client name, context), ended by `Unsubscribe`.
    subscriptions: Arc<Mutex<HashMap<(String, String), CancellationToken>>>,
}

/// An error as the gRPC status of its kind (`emco_core::grpc::code_of`).
fn status(e: &Error) -> Status {
    Status::new(emco_core::grpc::code_of(e.kind()), e.to_string())
}

fn context_id(field: &str, text: &str) -> Result<ContextId, Status> {
    ContextId::required_from_wire(field, text).map_err(|e| status(&e))
}

/// `(true, ok)` or `(false, the error)`.
fn answer(result: emco_core::Result<()>, ok: String) -> (bool, String) {
    match result {
        Ok(()) => (true, ok),
        Err(e) => (false, e.to_string()),
    }
}

#[tonic::async_trait]
impl Installapp for RsyncService {
    async fn install_app(
        &self,
        request: Request<InstallAppRequest>,
    ) -> Result<Response<InstallAppResponse>, Status> {
        let id = context_id("app_context", &request.get_ref().app_context)?;
        let (ok, msg) = answer(
            self.rsync.instantiate(id).await,
            format!("instantiation of AppContext {id} queued"),
        );
        Ok(Response::new(InstallAppResponse {
            app_context_installed: ok,
            app_context_install_message: msg,
        }))
    }

    async fn uninstall_app(
        &self,
        request: Request<UninstallAppRequest>,
    ) -> Result<Response<UninstallAppResponse>, Status> {
        let id = context_id("app_context", &request.get_ref().app_context)?;
        let (ok, msg) = answer(
            self.rsync.terminate(id).await,
            format!("termination of AppContext {id} queued"),
        );
        Ok(Response::new(UninstallAppResponse {
            app_context_uninstalled: ok,
            app_context_uninstall_message: msg,
        }))
    }

    async fn read_app_context(
        &self,
        request: Request<ReadAppContextRequest>,
    ) -> Result<Response<ReadAppContextResponse>, Status> {
        let id = context_id("app_context", &request.get_ref().app_context)?;
        let (ok, msg) = answer(
            self.rsync.read(id).await,
            format!("read of AppContext {id} queued"),
        );
        Ok(Response::new(ReadAppContextResponse {
            app_context_read_successful: ok,
            app_context_read_message: msg,
        }))
    }
}

#[tonic::async_trait]
impl Updateapp for RsyncService {
    async fn update_app(
        &self,
        request: Request<UpdateAppRequest>,
    ) -> Result<Response<UpdateAppResponse>, Status> {
        let r = request.get_ref();
        let from = context_id("update_from_appContext", &r.update_from_app_context)?;
        let to = context_id("update_to_appContext", &r.update_to_app_context)?;
        let (ok, msg) = answer(
            self.rsync.update(from, to).await,
            format!("update from AppContext {from} to {to} queued"),
        );
        Ok(Response::new(UpdateAppResponse {
            app_context_updated: ok,
            app_context_update_message: msg,
        }))
    }

    async fn rollback_app(
        &self,
        request: Request<RollbackAppRequest>,
    ) -> Result<Response<RollbackAppResponse>, Status> {
        let r = request.get_ref();
        let from = context_id("rollback_from_appContext", &r.rollback_from_app_context)?;
        let to = context_id("rollback_to_appContext", &r.rollback_to_app_context)?;
        let (ok, msg) = answer(
            self.rsync.rollback(from, to).await,
            format!("rollback from AppContext {from} to {to} queued"),
        );
        Ok(Response::new(RollbackAppResponse {
            app_context_rolledback: ok,
            app_context_rollback_message: msg,
        }))
    }
}

type NotificationStream = Pin<Box<dyn Stream<Item = Result<Notification, Status>> + Send>>;

#[tonic::async_trait]
impl ReadyNotify for RsyncService {
    type AlertStream = NotificationStream;

    async fn alert(&self, request: Request<Topic>) -> Result<Response<Self::AlertStream>, Status> {
        let topic = request.into_inner();
        let id = context_id("appContext", &topic.app_context)?;
        let token = CancellationToken::new();
        let key = (topic.client_name.clone(), topic.app_context.clone());
        if let Some(old) = lock(&self.subscriptions).insert(key, token.clone()) {
            // A client subscribing again replaces its earlier stream.
            old.cancel();
        }
        let subscription = self.rsync.subscribe_ready(id);
        let stream = futures::stream::unfold(
            (subscription, token, topic),
            |(mut sub, token, topic)| async move {
                let next = tokio::select! {
                    n = sub.next() => n?,
                    () = token.cancelled() => return None,
                };
                let item = Notification {
                    client_name: topic.client_name.clone(),
                    server_name: SERVER_NAME.to_owned(),
                    app_context: topic.app_context.clone(),
                    app: next.app,
                    cluster: next.cluster,
                };
                Some((Ok(item), (sub, token, topic)))
            },
        );
        Ok(Response::new(Box::pin(stream)))
    }

    async fn unsubscribe(
        &self,
        request: Request<Topic>,
    ) -> Result<Response<UnsubscribeResponse>, Status> {
        let topic = request.into_inner();
        if let Some(token) =
            lock(&self.subscriptions).remove(&(topic.client_name, topic.app_context))
        {
            token.cancel();
        }
        Ok(Response::new(UnsubscribeResponse {}))
    }
}
