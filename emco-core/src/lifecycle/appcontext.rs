//! AppContext, resource and cluster statuses as rsync drives them (EMCO.md sections 5 and 6,
//! seed 001's AppContext and resource diagrams).
//!
//! rsync events for one AppContext ([`rsync_transition`]; EMCO.md's table wins over the seed's):
//!
//! | event | allowed from | entry -> running -> done (failed) |
//! |---|---|---|
//! | Instantiate | Created, Instantiating, Instantiated, InstantiateFailed, Terminated, TerminateFailed | Instantiating -> Instantiated (InstantiateFailed) |
//! | Terminate | Instantiat\*, PreTerminate, Terminat\*, Updat\* | PreTerminate (from a running Instantiating/Updating) or Terminating -> Terminated (TerminateFailed) |
//! | Update (new context) | Created, Updating, Updated | Updating -> Updated (UpdateFailed) |
//! | UpdateDelete (old context) | Instantiat\*; Updat\* | Instantiating -> Instantiated (InstantiateFailed); Updating -> Updated (UpdateFailed) |
//! | Read | any | unchanged |
//!
//! Differences, and why: the seed also lets Instantiate start from Update* statuses; EMCO.md does
//! not, so neither do we. UpdateDelete from Updated is our addition: after a second update the old
//! context is itself an updated one, and its leftovers must still be deleted; from the failed
//! statuses too: a rollout that takes back a failed wave replaces the failed context with the
//! one before it, and what only the failed one applied must go. An event found in
//! its own running status (Instantiate in Instantiating, Update in Updating, UpdateDelete in the
//! running status of its old context's family) is one a crashed process left running: the
//! queue runs events one after the other, so nothing else leaves a context there, and the next
//! start resumes it.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The status of an AppContext (`/context/<id>/status/` holds `{"Status": ...}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum AppContextStatus {
    /// Written, not handed to rsync yet.
    Created,
    /// rsync is applying resources.
    Instantiating,
    /// Every resource was applied.
    Instantiated,
    /// Some resource failed to apply, or the operation was stopped.
    InstantiateFailed,
    /// A terminate arrived while instantiating; the running instantiate is being cancelled.
    PreTerminate,
    /// rsync is deleting resources.
    Terminating,
    /// Every resource was deleted.
    Terminated,
    /// Some resource failed to delete, or the operation was stopped.
    TerminateFailed,
    /// rsync is applying the changes of an update.
    Updating,
    /// The update was applied.
    Updated,
    /// The update failed or was stopped. Some EMCO versions write `UpdatedFailed`; both are read.
    #[serde(alias = "UpdatedFailed")]
    UpdateFailed,
}

impl AppContextStatus {
    /// Every status, for exhaustive checks.
    pub const ALL: [Self; 11] = [
        Self::Created,
        Self::Instantiating,
        Self::Instantiated,
        Self::InstantiateFailed,
        Self::PreTerminate,
        Self::Terminating,
        Self::Terminated,
        Self::TerminateFailed,
        Self::Updating,
        Self::Updated,
        Self::UpdateFailed,
    ];

    /// EMCO's name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Created => "Created",
            Self::Instantiating => "Instantiating",
            Self::Instantiated => "Instantiated",
            Self::InstantiateFailed => "InstantiateFailed",
            Self::PreTerminate => "PreTerminate",
            Self::Terminating => "Terminating",
            Self::Terminated => "Terminated",
            Self::TerminateFailed => "TerminateFailed",
            Self::Updating => "Updating",
            Self::Updated => "Updated",
            Self::UpdateFailed => "UpdateFailed",
        }
    }

    /// True while an operation is in progress.
    #[must_use]
    pub const fn is_running(self) -> bool {
        matches!(
            self,
            Self::Instantiating | Self::PreTerminate | Self::Terminating | Self::Updating
        )
    }

    /// The status a running operation ends in when the stop flag is set (it completes as
    /// failed); `None` when nothing is running.
    #[must_use]
    pub const fn stopped(self) -> Option<Self> {
        match self {
            Self::Instantiating => Some(Self::InstantiateFailed),
            Self::PreTerminate | Self::Terminating => Some(Self::TerminateFailed),
            Self::Updating => Some(Self::UpdateFailed),
            _ => None,
        }
    }
}

impl fmt::Display for AppContextStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The JSON value of `/context/<id>/status/`: `{"Status": "Instantiated"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusRecord {
    /// The status.
    #[serde(rename = "Status")]
    pub status: AppContextStatus,
}

/// An event queued for rsync on one AppContext.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RsyncEvent {
    /// Apply every resource.
    Instantiate,
    /// Delete every resource.
    Terminate,
    /// Apply what changed relative to the old context (event on the new context).
    Update,
    /// Delete what the new context no longer has (event on the old context).
    UpdateDelete,
    /// Read back resource status; changes no status.
    Read,
}

impl RsyncEvent {
    /// Every event, for exhaustive checks.
    pub const ALL: [Self; 5] = [
        Self::Instantiate,
        Self::Terminate,
        Self::Update,
        Self::UpdateDelete,
        Self::Read,
    ];
}

impl fmt::Display for RsyncEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The statuses an accepted event moves an AppContext through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventStatuses {
    /// Written when the event is accepted (PreTerminate when a terminate must first cancel a
    /// running instantiate or update).
    pub entry: AppContextStatus,
    /// While the event's work runs.
    pub running: AppContextStatus,
    /// When it succeeded.
    pub done: AppContextStatus,
    /// When it failed or was stopped.
    pub failed: AppContextStatus,
}

impl EventStatuses {
    const fn new(
        running: AppContextStatus,
        done: AppContextStatus,
        failed: AppContextStatus,
    ) -> Self {
        Self {
            entry: running,
            running,
            done,
            failed,
        }
    }

    /// The AppContext status once the event's work on these resources is over (seed 001: any
    /// resource Failed -> failed, otherwise done), or `None` while some resource is still Pending
    /// or Retrying.
    pub fn completion(
        &self,
        resources: impl IntoIterator<Item = RsyncStatus>,
    ) -> Option<AppContextStatus> {
        let mut failed = false;
        for r in resources {
            match r {
                RsyncStatus::Pending | RsyncStatus::Retrying => return None,
                RsyncStatus::Failed => failed = true,
                RsyncStatus::Applied | RsyncStatus::Deleted => {}
            }
        }
        Some(if failed { self.failed } else { self.done })
    }
}

/// What `event` does to an AppContext in status `current` (see the module table).
///
/// # Errors
/// FailedPrecondition when the event is not allowed in `current`: rsync marks it as error in the
/// queue and moves on to the next event.
pub fn rsync_transition(current: AppContextStatus, event: RsyncEvent) -> Result<EventStatuses> {
    use AppContextStatus as S;
    let instantiate = EventStatuses::new(S::Instantiating, S::Instantiated, S::InstantiateFailed);
    let update = EventStatuses::new(S::Updating, S::Updated, S::UpdateFailed);
    let statuses = match (event, current) {
        (
            RsyncEvent::Instantiate,
            S::Created
            | S::Instantiating
            | S::Instantiated
            | S::InstantiateFailed
            | S::Terminated
            | S::TerminateFailed,
        ) => Some(instantiate),
        (RsyncEvent::Terminate, S::Created) => None,
        (RsyncEvent::Terminate, _) => {
            let mut t = EventStatuses::new(S::Terminating, S::Terminated, S::TerminateFailed);
            if matches!(current, S::Instantiating | S::Updating | S::PreTerminate) {
                t.entry = S::PreTerminate;
            }
            Some(t)
        }
        (RsyncEvent::Update, S::Created | S::Updating | S::Updated) => Some(update),
        (RsyncEvent::UpdateDelete, S::Instantiated | S::Instantiating | S::InstantiateFailed) => {
            Some(instantiate)
        }
        (RsyncEvent::UpdateDelete, S::Updated | S::Updating | S::UpdateFailed) => Some(update),
        (RsyncEvent::Read, _) => Some(EventStatuses::new(current, current, current)),
        _ => None,
    };
    statuses.ok_or_else(|| {
        Error::failed_precondition(format!(
            "rsync event {event} is not allowed in AppContext status {current}; the event is marked error and skipped"
        ))
    })
}

/// The status of one resource on one cluster (`.../resource/<name+Kind>/status/`
/// holds `{"Status": ...}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RsyncStatus {
    /// Waiting to be applied (or, during terminate, to be deleted).
    Pending,
    /// Applied on the cluster.
    Applied,
    /// Apply or delete failed, or retries ran out.
    Failed,
    /// The cluster is unreachable; rsync retries.
    Retrying,
    /// Deleted from the cluster (or never applied, so nothing to delete).
    Deleted,
}

impl RsyncStatus {
    /// Every status, for exhaustive checks.
    pub const ALL: [Self; 5] = [
        Self::Pending,
        Self::Applied,
        Self::Failed,
        Self::Retrying,
        Self::Deleted,
    ];
}

impl RsyncStatus {
    /// The name EMCO stores and answers.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Applied => "Applied",
            Self::Failed => "Failed",
            Self::Retrying => "Retrying",
            Self::Deleted => "Deleted",
        }
    }
}

impl fmt::Display for RsyncStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What happens to a resource (seed 001's resource diagram).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ResourceEvent {
    /// An instantiate or update starts: every resource becomes Pending.
    Start,
    /// The apply succeeded.
    Applied,
    /// The delete succeeded.
    Deleted,
    /// The apply or delete failed for a reason other than connectivity.
    Failed,
    /// The cluster could not be reached: retry.
    Unreachable,
    /// Retries ran out (retry limit exceeded, or the stop flag was set).
    RetriesExhausted,
    /// A terminate starts: Applied resources become Pending (to be deleted); Pending, Failed and
    /// Retrying ones were never applied and become Deleted.
    Terminate,
}

impl ResourceEvent {
    /// Every event, for exhaustive checks.
    pub const ALL: [Self; 7] = [
        Self::Start,
        Self::Applied,
        Self::Deleted,
        Self::Failed,
        Self::Unreachable,
        Self::RetriesExhausted,
        Self::Terminate,
    ];
}

/// The status a resource in `current` reaches by `event`.
///
/// # Errors
/// FailedPrecondition when the event cannot happen in `current` (an apply result for a resource
/// that is not being worked on, for example): a bug in the caller's bookkeeping.
pub fn resource_transition(current: RsyncStatus, event: ResourceEvent) -> Result<RsyncStatus> {
    use ResourceEvent as E;
    use RsyncStatus as S;
    let next = match (event, current) {
        (E::Start, _) => Some(S::Pending),
        (E::Applied, S::Pending | S::Retrying) => Some(S::Applied),
        (E::Deleted, S::Pending | S::Retrying) => Some(S::Deleted),
        (E::Failed, S::Pending | S::Retrying) | (E::RetriesExhausted, S::Retrying) => {
            Some(S::Failed)
        }
        (E::Unreachable, S::Pending | S::Retrying) => Some(S::Retrying),
        (E::Terminate, S::Applied) => Some(S::Pending),
        (E::Terminate, S::Pending | S::Failed | S::Retrying | S::Deleted) => Some(S::Deleted),
        _ => None,
    };
    next.ok_or_else(|| {
        Error::failed_precondition(format!(
            "resource event {event:?} cannot happen in resource status {current}"
        ))
    })
}

/// A cluster's reachability (`.../cluster/<provider+cluster>/readystatus/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ClusterReadiness {
    /// Reachable.
    Available,
    /// Unreachable; rsync retries.
    Retrying,
    /// Not known yet.
    Unknown,
}

impl fmt::Display for ClusterReadiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wire_names() {
        let r: StatusRecord =
            serde_json::from_value(json!({"Status": "InstantiateFailed"})).unwrap();
        assert_eq!(r.status, AppContextStatus::InstantiateFailed);
        assert_eq!(
            serde_json::to_value(r).unwrap(),
            json!({"Status": "InstantiateFailed"})
        );
        for s in AppContextStatus::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), json!(s.as_str()));
        }
        assert_eq!(
            serde_json::to_value(ClusterReadiness::Retrying).unwrap(),
            json!("Retrying")
        );
        assert_eq!(
            serde_json::to_value(RsyncStatus::Deleted).unwrap(),
            json!("Deleted")
        );
        assert_eq!(
            serde_json::to_value(RsyncEvent::UpdateDelete).unwrap(),
            json!("UpdateDelete")
        );
    }

    #[test]
    fn event_table() {
        use AppContextStatus as S;
        let t = rsync_transition(S::Instantiating, RsyncEvent::Terminate).unwrap();
        assert_eq!(
            (t.entry, t.running, t.done, t.failed),
            (
                S::PreTerminate,
                S::Terminating,
                S::Terminated,
                S::TerminateFailed
            )
        );
        assert_eq!(
            rsync_transition(S::Instantiated, RsyncEvent::Terminate)
                .unwrap()
                .entry,
            S::Terminating
        );
        assert!(rsync_transition(S::Created, RsyncEvent::Terminate).is_err());
        assert!(
            rsync_transition(S::Updated, RsyncEvent::Instantiate).is_err(),
            "EMCO.md over the seed"
        );
        assert!(rsync_transition(S::Instantiated, RsyncEvent::Update).is_err());
        assert_eq!(
            rsync_transition(S::Created, RsyncEvent::Update)
                .unwrap()
                .done,
            S::Updated
        );
        assert_eq!(
            rsync_transition(S::Instantiated, RsyncEvent::UpdateDelete)
                .unwrap()
                .done,
            S::Instantiated
        );
        assert!(rsync_transition(S::Terminated, RsyncEvent::UpdateDelete).is_err());
        // A failed context's leftovers can be deleted when it is replaced.
        assert_eq!(
            rsync_transition(S::UpdateFailed, RsyncEvent::UpdateDelete)
                .unwrap()
                .running,
            S::Updating
        );
        assert!(rsync_transition(S::InstantiateFailed, RsyncEvent::UpdateDelete).is_ok());
        // What a killed process left running is resumed in the same statuses.
        for (event, running) in [
            (RsyncEvent::Instantiate, S::Instantiating),
            (RsyncEvent::Update, S::Updating),
            (RsyncEvent::UpdateDelete, S::Instantiating),
            (RsyncEvent::UpdateDelete, S::Updating),
        ] {
            let statuses = rsync_transition(running, event).unwrap();
            assert_eq!(
                (statuses.entry, statuses.running),
                (running, running),
                "{event}"
            );
        }
        let e = rsync_transition(S::Created, RsyncEvent::Terminate).unwrap_err();
        assert!(e.message().contains("Terminate") && e.message().contains("Created"));
        assert_eq!(S::Updating.stopped(), Some(S::UpdateFailed));
        assert_eq!(S::Instantiated.stopped(), None);
    }

    #[test]
    fn completion_follows_the_resources() {
        use RsyncStatus as R;
        let t = rsync_transition(AppContextStatus::Created, RsyncEvent::Instantiate).unwrap();
        assert_eq!(t.completion([R::Applied, R::Retrying]), None);
        assert_eq!(
            t.completion([R::Applied, R::Failed]),
            Some(AppContextStatus::InstantiateFailed)
        );
        assert_eq!(
            t.completion([R::Applied, R::Applied]),
            Some(AppContextStatus::Instantiated)
        );
        assert_eq!(t.completion([]), Some(AppContextStatus::Instantiated));
        let t = rsync_transition(AppContextStatus::Instantiated, RsyncEvent::Terminate).unwrap();
        assert_eq!(
            t.completion([R::Deleted, R::Deleted]),
            Some(AppContextStatus::Terminated)
        );
        assert_eq!(t.completion([R::Pending]), None);
    }

    #[test]
    fn resource_diagram() {
        use ResourceEvent as E;
        use RsyncStatus as S;
        assert_eq!(
            resource_transition(S::Pending, E::Unreachable).unwrap(),
            S::Retrying
        );
        assert_eq!(
            resource_transition(S::Retrying, E::Applied).unwrap(),
            S::Applied
        );
        assert_eq!(
            resource_transition(S::Retrying, E::RetriesExhausted).unwrap(),
            S::Failed
        );
        assert_eq!(
            resource_transition(S::Applied, E::Terminate).unwrap(),
            S::Pending
        );
        assert_eq!(
            resource_transition(S::Failed, E::Terminate).unwrap(),
            S::Deleted
        );
        assert!(resource_transition(S::Applied, E::Applied).is_err());
        assert!(resource_transition(S::Pending, E::RetriesExhausted).is_err());
    }
}
