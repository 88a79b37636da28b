//! The lifecycle of deployment intent groups: instantiate, terminate, stop, update, migrate and
//! rollback (EMCO.md section 4).

use axum::Router;

use crate::Orchestrator;

/// The lifecycle routes of deployment intent groups (other than `approve` and `status`).
pub(crate) fn routes() -> Router<Orchestrator> {
    Router::new()
}
