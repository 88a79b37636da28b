//! What every service of the orchestrator works on: the objects, the AppContexts, the rsync
//! engine, the order of record writes and hand-overs, and the process's shutdown signal.
//! Deployments alone also get the controllers, the anyOf choice and the history limit
//! ([`crate::Deployments`]).

use emco_core::poison::lock;
use std::sync::{Arc, Mutex};

use emco_appcontext::AppContext;
use emco_core::lifecycle::StateInfo;
use emco_core::{Found, Result};
use emco_rsync::engine::Rsync;
use emco_store::{AppContextStore, ResourceStore};
use tokio_util::sync::CancellationToken;

use crate::Onboarding;
use crate::handover::HandOverLocks;

/// The stores, the engine and the hand-over order the services share. Cheap to clone; clones
/// share everything.
#[derive(Debug, Clone)]
pub(crate) struct Records {
    pub(crate) objects: Onboarding,
    contexts: Arc<dyn AppContextStore>,
    rsync: Rsync,
    /// Orders each record write with its hand-over to rsync (see [`crate::handover`]).
    pub(crate) handover: HandOverLocks,
    /// Cancelled when the process shuts down (the token given to
    /// [`crate::Orchestrator::start`]): background work (credential issuing, status streams)
    /// ends with it.
    shutdown: Arc<Mutex<CancellationToken>>,
}

impl Records {
    pub(crate) fn new(
        objects: Onboarding,
        contexts: Arc<dyn AppContextStore>,
        rsync: Rsync,
    ) -> Self {
        Self {
            objects,
            contexts,
            rsync,
            handover: HandOverLocks::default(),
            shutdown: Arc::default(),
        }
    }

    pub(crate) fn store(&self) -> &Arc<dyn ResourceStore> {
        self.objects.store()
    }

    pub(crate) fn contexts(&self) -> &Arc<dyn AppContextStore> {
        &self.contexts
    }

    pub(crate) fn rsync(&self) -> &Rsync {
        &self.rsync
    }

    /// The current context of lifecycle record `state`; `None` when it names none or the
    /// context is gone.
    ///
    /// # Errors
    /// Internal for a corrupt record; the store's errors.
    pub(crate) async fn load_context(&self, state: &StateInfo) -> Result<Option<AppContext>> {
        let Some(id) = state.current_context_id()? else {
            return Ok(None);
        };
        AppContext::load(Arc::clone(self.contexts()), id)
            .await
            .found()
    }

    /// The shutdown signal given to [`crate::Orchestrator::start`] (never cancelled before it).
    pub(crate) fn shutdown_token(&self) -> CancellationToken {
        lock(&self.shutdown).clone()
    }

    pub(crate) fn set_shutdown(&self, token: CancellationToken) {
        *lock(&self.shutdown) = token;
    }
}
