//! The status of deployment intent groups (`GET DIG/status`, EMCO.md section 7), read from their
//! AppContexts.

use axum::Router;

use crate::Orchestrator;

/// The status route of deployment intent groups.
pub(crate) fn routes() -> Router<Orchestrator> {
    Router::new()
}
