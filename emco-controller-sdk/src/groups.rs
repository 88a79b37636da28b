//! The lifecycle of other deployment intent groups, as an in-process action controller may drive
//! it: tac deploys the groups of the Temporal workers its hooks need before it starts them, and
//! terminates them after (src/tac/internal/action/action.go drives EMCO's orchestrator module
//! the same way).
//!
//! The orchestrator owns the controllers and the controllers reach the orchestrator, so the
//! registry hands its controllers a [`GroupsLink`]: a weak link the orchestrator binds once it is
//! built, which keeps neither alive.

use std::fmt;
use std::sync::{Arc, OnceLock, Weak};

use async_trait::async_trait;
use emco_core::lifecycle::DigState;
use emco_core::{DigRef, Error, Result};

/// What a controller may do to a deployment intent group.
#[async_trait]
pub trait Groups: Send + Sync {
    /// The group's current state, the last of its lifecycle record.
    ///
    /// # Errors
    /// NotFound for a group that does not exist; the stores' errors.
    async fn state(&self, dig: &DigRef) -> Result<DigState>;

    /// Instantiates the group, as `POST DIG/instantiate`.
    ///
    /// # Errors
    /// As the route.
    async fn instantiate(&self, dig: &DigRef) -> Result<()>;

    /// Whether every resource of the group's deployment is ready (`readyStatus` `Ready` of
    /// `GET DIG/status?status=ready`).
    ///
    /// # Errors
    /// As the route.
    async fn ready(&self, dig: &DigRef) -> Result<bool>;

    /// Terminates the group, as `POST DIG/terminate`.
    ///
    /// # Errors
    /// As the route.
    async fn terminate(&self, dig: &DigRef) -> Result<()>;
}

/// A weak link to the [`Groups`] of the orchestrator running the controller; unbound for a
/// controller served alone.
#[derive(Clone, Default)]
pub struct GroupsLink(Arc<OnceLock<Weak<dyn Groups>>>);

impl fmt::Debug for GroupsLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bound = self.0.get().is_some_and(|w| w.strong_count() > 0);
        f.debug_tuple("GroupsLink").field(&bound).finish()
    }
}

impl GroupsLink {
    /// Links to `groups` (the first binding stays); the caller keeps `groups` alive.
    pub fn bind(&self, groups: &Arc<dyn Groups>) {
        if self.0.set(Arc::downgrade(groups)).is_err() {
            tracing::debug!("the controllers' groups were linked already");
        }
    }

    /// The linked groups.
    ///
    /// # Errors
    /// FailedPrecondition when nothing is linked (a controller served alone over gRPC) or the
    /// orchestrator is gone.
    pub fn get(&self) -> Result<Arc<dyn Groups>> {
        self.0.get().and_then(Weak::upgrade).ok_or_else(|| {
            Error::failed_precondition(
                "this controller runs without an orchestrator to deploy other deployment intent \
                 groups with: run it in-process",
            )
        })
    }
}
