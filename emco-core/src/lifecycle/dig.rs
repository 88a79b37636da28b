//! The deployment intent group lifecycle (seed 001's state diagram, EMCO.md sections 3 and 4).
//!
//! | operation | allowed from | to |
//! |---|---|---|
//! | Put (PUT the DIG itself) | Created | Created |
//! | Approve | Created, Approved (no-op), Terminated, TerminateStopped | Approved |
//! | Instantiate | Approved, Terminated, TerminateStopped | Instantiated |
//! | Terminate | Instantiated, Updated, InstantiateStopped, TerminateStopped | Terminated |
//! | Stop | Instantiated, Updated / Terminated (stopped states: no-op) | InstantiateStopped / TerminateStopped |
//! | Update, Migrate, Rollback | Instantiated, Updated | Updated |
//! | Delete | Created, Approved, Terminated, TerminateStopped | deleted |
//!
//! Refusals are FailedPrecondition ("not yet in a state for it"), except where the request
//! contradicts what is deployed: instantiating what is already instantiated, terminating what is
//! already terminated and deleting what is still deployed are Conflict (EMCO answers 409).
//!
//! Changing a group's intents does not touch its state, as in EMCO (the orchestrator's
//! `CreateGenericPlacementIntent`, `CreateAppIntent` and `AddIntent` never write the state
//! record, and controllers' intents live in other services): intents added after approve are
//! read at instantiate, and an update deploys what changed since.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::appcontext::AppContextStatus;
use crate::error::{Error, ErrorKind, Result};
use crate::ids::ContextId;

/// The lifecycle state of a deployment intent group, with EMCO's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DigState {
    /// Created or modified; not yet approved.
    Created,
    /// Approved for instantiation.
    Approved,
    /// Instantiated (the AppContext may still be instantiating).
    Instantiated,
    /// Terminated (the AppContext may still be terminating).
    Terminated,
    /// An instantiate or update was stopped (completed as failed).
    InstantiateStopped,
    /// A terminate was stopped (completed as failed); the DIG may now be deleted.
    TerminateStopped,
    /// Updated, migrated or rolled back to another revision.
    Updated,
    /// A cluster's network intents were applied (ncm's state of a cluster; never a group's).
    Applied,
}

impl DigState {
    /// Every state of a deployment intent group, for exhaustive checks ([`DigState::Applied`]
    /// is a cluster's).
    pub const ALL: [Self; 7] = [
        Self::Created,
        Self::Approved,
        Self::Instantiated,
        Self::Terminated,
        Self::InstantiateStopped,
        Self::TerminateStopped,
        Self::Updated,
    ];

    /// EMCO's name of the state.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Created => "Created",
            Self::Approved => "Approved",
            Self::Instantiated => "Instantiated",
            Self::Terminated => "Terminated",
            Self::InstantiateStopped => "InstantiateStopped",
            Self::TerminateStopped => "TerminateStopped",
            Self::Updated => "Updated",
            Self::Applied => "Applied",
        }
    }

    /// True while the composite app is (or may be) deployed on clusters.
    #[must_use]
    pub const fn is_deployed(self) -> bool {
        matches!(
            self,
            Self::Instantiated | Self::Updated | Self::InstantiateStopped
        )
    }
}

impl fmt::Display for DigState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a user asks of a deployment intent group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DigOperation {
    /// PUT the deployment intent group itself.
    Put,
    /// `POST approve`.
    Approve,
    /// `POST instantiate`.
    Instantiate,
    /// `POST terminate`.
    Terminate,
    /// `POST stop`: stop retrying the running instantiate or terminate.
    Stop,
    /// `POST update`: deploy the modified intents as a new revision.
    Update,
    /// `POST migrate`: move to another DIG's version.
    Migrate,
    /// `POST rollback`: deploy an earlier revision again.
    Rollback,
    /// `DELETE` the deployment intent group.
    Delete,
}

impl DigOperation {
    /// Every operation, for exhaustive checks.
    pub const ALL: [Self; 9] = [
        Self::Put,
        Self::Approve,
        Self::Instantiate,
        Self::Terminate,
        Self::Stop,
        Self::Update,
        Self::Migrate,
        Self::Rollback,
        Self::Delete,
    ];

    /// A lowercase name for messages (`"instantiate"`).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Put => "put",
            Self::Approve => "approve",
            Self::Instantiate => "instantiate",
            Self::Terminate => "terminate",
            Self::Stop => "stop",
            Self::Update => "update",
            Self::Migrate => "migrate",
            Self::Rollback => "rollback",
            Self::Delete => "delete",
        }
    }
}

impl fmt::Display for DigOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an allowed operation leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The deployment intent group is in this state afterwards.
    State(DigState),
    /// The deployment intent group is deleted.
    Deleted,
}

/// The state a deployment intent group in `state` reaches by `op`.
///
/// # Errors
/// FailedPrecondition or Conflict (see the module table) naming the state and the operation.
pub fn transition(state: DigState, op: DigOperation) -> Result<Outcome> {
    use DigOperation as O;
    use DigState as S;
    let refuse = |kind: ErrorKind, why: &str| {
        Err(Error::new(
            kind,
            format!("cannot {op} deployment intent group in state {state}: {why}"),
        ))
    };
    let to = |s: DigState| Ok(Outcome::State(s));
    match (op, state) {
        (O::Put, S::Created) => to(S::Created),
        (O::Put, _) => refuse(
            ErrorKind::FailedPrecondition,
            "it can only be replaced while Created",
        ),

        (O::Approve, S::Created | S::Approved | S::Terminated | S::TerminateStopped) => {
            to(S::Approved)
        }
        (O::Approve, _) => refuse(
            ErrorKind::FailedPrecondition,
            "it is deployed; terminate it first",
        ),

        (O::Instantiate, S::Approved | S::Terminated | S::TerminateStopped) => to(S::Instantiated),
        (O::Instantiate, S::Created) => refuse(ErrorKind::FailedPrecondition, "approve it first"),
        (O::Instantiate, _) => refuse(ErrorKind::Conflict, "it is already instantiated"),

        (
            O::Terminate,
            S::Instantiated | S::Updated | S::InstantiateStopped | S::TerminateStopped,
        ) => to(S::Terminated),
        (O::Terminate, S::Terminated) => refuse(ErrorKind::Conflict, "it is already terminated"),
        (O::Terminate, _) => refuse(ErrorKind::FailedPrecondition, "it was never instantiated"),

        (O::Stop, S::Instantiated | S::Updated | S::InstantiateStopped) => {
            to(S::InstantiateStopped)
        }
        (O::Stop, S::Terminated | S::TerminateStopped) => to(S::TerminateStopped),
        (O::Stop, _) => refuse(
            ErrorKind::FailedPrecondition,
            "no instantiate or terminate to stop",
        ),

        (O::Update | O::Migrate | O::Rollback, S::Instantiated | S::Updated) => to(S::Updated),
        (O::Update | O::Migrate | O::Rollback, _) => refuse(
            ErrorKind::FailedPrecondition,
            "only an instantiated deployment intent group can change revision",
        ),

        (O::Delete, S::Created | S::Approved | S::Terminated | S::TerminateStopped) => {
            Ok(Outcome::Deleted)
        }
        (O::Delete, _) => refuse(ErrorKind::Conflict, "it is deployed; terminate it first"),
    }
}

/// [`transition`] for the group named `dig`, refusing with the texts of EMCO's orchestrator
/// (src/orchestrator/pkg/module/instantiation.go, update.go: the name is glued on without a
/// separator where EMCO does so). The kinds, and so the codes, stay ours: EMCO answers these
/// refusals with a 500.
///
/// # Errors
/// As [`transition`].
pub fn transition_named(dig: &str, state: DigState, op: DigOperation) -> Result<Outcome> {
    transition(state, op).map_err(|e| match emco_refusal(dig, state, op) {
        Some(text) => Error::new(e.kind(), text),
        None => e,
    })
}

/// EMCO's text for refusing `op` on the group `dig` in `state`, where EMCO has one.
fn emco_refusal(dig: &str, state: DigState, op: DigOperation) -> Option<String> {
    use DigOperation as O;
    use DigState as S;
    Some(match (op, state) {
        (O::Approve, S::Instantiated | S::Updated) => {
            format!("DeploymentIntentGroup has already been instantiated{dig}")
        }
        (O::Approve, s) => format!("DeploymentIntentGroup is in an unknown state{s}"),
        (O::Instantiate, S::Created) => {
            format!("DeploymentIntentGroup must be Approved before instantiating{dig}")
        }
        (O::Instantiate, S::InstantiateStopped) => {
            format!("DeploymentIntentGroup has already been instantiated and stopped{dig}")
        }
        (O::Instantiate, S::Instantiated) => {
            format!("DeploymentIntentGroup has already been instantiated{dig}")
        }
        (O::Instantiate, s) => format!("DeploymentIntentGroup is in an unknown state{s}"),
        (O::Terminate | O::Update | O::Migrate, _) => {
            format!("DeploymentIntentGroup is not instantiated :{dig}")
        }
        (O::Stop, S::Created) => format!("DeploymentIntentGroup have not been approved: {dig}"),
        (O::Stop, S::Approved) => format!("DeploymentIntentGroup has not been instantiated:{dig}"),
        (O::Stop, S::TerminateStopped) => {
            format!("DeploymentIntentGroup termination already stopped: {dig}")
        }
        (O::Stop, S::InstantiateStopped) => {
            format!("DeploymentIntentGroup instantiation already stopped: {dig}")
        }
        _ => return None,
    })
}

/// Like [`transition`] for [`DigOperation::Delete`], also checking the status of the context
/// being terminated: EMCO refuses deletion until a terminate has completed (or was stopped).
///
/// # Errors
/// Conflict while the terminate is still running; otherwise as [`transition`].
pub fn check_delete(state: DigState, context: Option<AppContextStatus>) -> Result<()> {
    transition(state, DigOperation::Delete)?;
    match context {
        Some(s) if state == DigState::Terminated && s.is_running() => {
            Err(Error::conflict(format!(
                "cannot delete deployment intent group in state {state}: its AppContext is still {s}; wait or stop it"
            )))
        }
        _ => Ok(()),
    }
}

/// One entry of a deployment intent group's state history, as EMCO stores it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateAction {
    /// The state entered.
    pub state: DigState,
    /// The AppContext id of the operation (empty for Created/Approved).
    #[serde(default)]
    pub instance: String,
    /// When, RFC 3339, as the caller recorded it.
    #[serde(default)]
    pub time: String,
    /// The revision deployed by this action (0 before the first instantiate).
    #[serde(default)]
    pub revision: i64,
}

/// The lifecycle record kept beside a deployment intent group:
/// `{statusctxid, actions:[{state, instance, time, revision}]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateInfo {
    /// The AppContext used to collect status.
    #[serde(default)]
    pub statusctxid: String,
    /// The history, oldest first.
    #[serde(default)]
    pub actions: Vec<StateAction>,
}

impl StateInfo {
    /// The record of a freshly created deployment intent group.
    pub fn created(time: impl Into<String>) -> Self {
        Self {
            statusctxid: String::new(),
            actions: vec![StateAction {
                state: DigState::Created,
                instance: String::new(),
                time: time.into(),
                revision: 0,
            }],
        }
    }

    /// The current state: the last action's (Created for an empty history).
    #[must_use]
    pub fn current_state(&self) -> DigState {
        self.actions.last().map_or(DigState::Created, |a| a.state)
    }

    /// The AppContext of the latest operation that had one.
    #[must_use]
    pub fn current_context(&self) -> Option<&str> {
        self.actions
            .iter()
            .rev()
            .map(|a| a.instance.as_str())
            .find(|i| !i.is_empty())
    }

    /// The id of [`Self::current_context`]; `None` before any.
    ///
    /// # Errors
    /// Internal when the record names something that is not an id (a corrupt record).
    pub fn current_context_id(&self) -> Result<Option<ContextId>> {
        self.current_context()
            .map(|id| ContextId::from_record(id, "a lifecycle record"))
            .transpose()
    }

    /// The context `current` replaced: the latest other one the record names (`None` when it
    /// names no other, or only text that is not an id).
    #[must_use]
    pub fn previous_context(&self, current: ContextId) -> Option<ContextId> {
        let current = current.to_string();
        self.actions
            .iter()
            .rev()
            .map(|a| a.instance.as_str())
            .find(|i| !i.is_empty() && *i != current)
            .and_then(|i| i.parse().ok())
    }

    /// Every context the record names, each once, in ascending order.
    ///
    /// # Errors
    /// As [`Self::current_context_id`].
    pub fn context_ids(&self) -> Result<Vec<ContextId>> {
        let mut ids = self
            .actions
            .iter()
            .filter(|a| !a.instance.is_empty())
            .map(|a| ContextId::from_record(&a.instance, "a lifecycle record"))
            .collect::<Result<Vec<_>>>()?;
        ids.sort_unstable();
        ids.dedup();
        Ok(ids)
    }

    /// The contexts a history of `keep` revisions no longer holds: every context the record
    /// names but the `keep` most recently deployed (by the last action naming each) and the
    /// current one, oldest first.
    ///
    /// # Errors
    /// As [`Self::current_context_id`].
    pub fn contexts_beyond(&self, keep: usize) -> Result<Vec<ContextId>> {
        let current = self.current_context();
        // The last action naming each context, newest first.
        let mut newest: Vec<&str> = Vec::new();
        for a in self.actions.iter().rev() {
            if !a.instance.is_empty() && !newest.contains(&a.instance.as_str()) {
                newest.push(&a.instance);
            }
        }
        newest
            .into_iter()
            .skip(keep)
            .rev()
            .filter(|id| Some(*id) != current)
            .map(|id| ContextId::from_record(id, "a lifecycle record"))
            .collect()
    }

    /// The highest revision recorded (0 before the first instantiate).
    #[must_use]
    pub fn latest_revision(&self) -> i64 {
        self.actions.iter().map(|a| a.revision).max().unwrap_or(0)
    }

    /// The AppContext of each revision of the current deployment (since the last instantiate),
    /// for rollback. A revision recorded twice keeps its latest context.
    #[must_use]
    pub fn contexts_by_revision(&self) -> BTreeMap<i64, &str> {
        let start = self
            .actions
            .iter()
            .rposition(|a| a.state == DigState::Instantiated)
            .unwrap_or(0);
        self.actions[start..]
            .iter()
            .filter(|a| {
                matches!(a.state, DigState::Instantiated | DigState::Updated)
                    && !a.instance.is_empty()
            })
            .map(|a| (a.revision, a.instance.as_str()))
            .collect()
    }

    /// Checks `op` against the current state and records the result.
    ///
    /// Revisions: instantiate deploys revision 1 (as EMCO); update, migrate and rollback deploy
    /// the next revision (a rollback re-deploys an old revision's content as a new revision, so
    /// revisions only grow); other operations keep the latest. An operation that leaves the state
    /// unchanged without deploying (modify while Created or Instantiated, approve twice, stop
    /// twice, put) records nothing.
    ///
    /// # Errors
    /// As [`transition`]; the record is unchanged then.
    pub fn apply(
        &mut self,
        op: DigOperation,
        instance: impl Into<String>,
        time: impl Into<String>,
    ) -> Result<Outcome> {
        let from = self.current_state();
        let outcome = transition(from, op)?;
        if let Outcome::State(state) = outcome {
            let revision = match op {
                DigOperation::Instantiate => 1,
                DigOperation::Update | DigOperation::Migrate | DigOperation::Rollback => {
                    self.latest_revision() + 1
                }
                _ => self.latest_revision(),
            };
            let deploys = matches!(
                op,
                DigOperation::Instantiate
                    | DigOperation::Update
                    | DigOperation::Migrate
                    | DigOperation::Rollback
                    | DigOperation::Terminate
            );
            if state != from || deploys {
                self.actions.push(StateAction {
                    state,
                    instance: instance.into(),
                    time: time.into(),
                    revision,
                });
            }
        }
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wire_form() {
        let v = json!({"statusctxid": "123", "actions": [
            {"state": "Created", "instance": "", "time": "2026-01-01T00:00:00Z", "revision": 0},
            {"state": "Approved", "instance": "", "time": "2026-01-01T00:00:01Z", "revision": 0},
            {"state": "Instantiated", "instance": "777", "time": "2026-01-01T00:00:02Z", "revision": 1},
            {"state": "TerminateStopped", "instance": "777", "time": "2026-01-01T00:00:03Z", "revision": 1}]});
        let s: StateInfo = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(s.current_state(), DigState::TerminateStopped);
        assert_eq!(s.current_context(), Some("777"));
        assert_eq!(serde_json::to_value(&s).unwrap(), v);
        assert!(serde_json::from_value::<DigState>(json!("Deleted")).is_err());
    }

    #[test]
    fn history_and_revisions() {
        let mut s = StateInfo::created("t0");
        s.apply(DigOperation::Approve, "", "t1").unwrap();
        assert_eq!(
            s.apply(DigOperation::Approve, "", "t").unwrap(),
            Outcome::State(DigState::Approved)
        );
        assert_eq!(
            s.actions.len(),
            2,
            "approving an approved group records nothing"
        );
        s.apply(DigOperation::Instantiate, "c1", "t2").unwrap();
        s.apply(DigOperation::Update, "c2", "t3").unwrap();
        s.apply(DigOperation::Update, "c3", "t4").unwrap();
        assert_eq!(s.latest_revision(), 3);
        s.apply(DigOperation::Rollback, "c4", "t5").unwrap();
        assert_eq!(s.latest_revision(), 4);
        let by_rev = s.contexts_by_revision();
        assert_eq!(by_rev.get(&1), Some(&"c1"));
        assert_eq!(by_rev.get(&4), Some(&"c4"));
        assert_eq!(s.current_context(), Some("c4"));
        let before = s.clone();
        assert!(s.apply(DigOperation::Delete, "", "t6").is_err());
        assert_eq!(s, before);
        s.apply(DigOperation::Terminate, "c4", "t7").unwrap();
        assert_eq!(s.current_state(), DigState::Terminated);
        assert_eq!(s.actions.last().map(|a| a.revision), Some(4));
        s.apply(DigOperation::Instantiate, "c5", "t8").unwrap();
        let by_rev = s.contexts_by_revision();
        assert_eq!(by_rev.len(), 1, "only the current deployment's revisions");
        assert_eq!(by_rev.get(&1), Some(&"c5"));
    }

    #[test]
    fn the_previous_context_is_the_latest_other_one() {
        let mut s = StateInfo::created("t0");
        s.apply(DigOperation::Approve, "", "t1").unwrap();
        s.apply(DigOperation::Instantiate, "11", "t2").unwrap();
        assert_eq!(s.previous_context(ContextId::new(11)), None);
        s.apply(DigOperation::Update, "12", "t3").unwrap();
        s.apply(DigOperation::Update, "13", "t4").unwrap();
        assert_eq!(
            s.previous_context(ContextId::new(13)),
            Some(ContextId::new(12))
        );
        assert_eq!(
            s.previous_context(ContextId::new(12)),
            Some(ContextId::new(13)),
            "the latest other, whatever its order"
        );
    }

    #[test]
    fn a_history_of_some_revisions_keeps_the_newest_contexts() {
        let mut s = StateInfo::created("t0");
        s.apply(DigOperation::Approve, "", "t1").unwrap();
        assert!(s.contexts_beyond(2).unwrap().is_empty(), "nothing deployed");
        s.apply(DigOperation::Instantiate, "11", "t2").unwrap();
        for (ctx, t) in [("12", "t3"), ("13", "t4"), ("14", "t5")] {
            s.apply(DigOperation::Update, ctx, t).unwrap();
        }
        let ids = |v: Vec<ContextId>| v.into_iter().map(ContextId::get).collect::<Vec<_>>();
        assert_eq!(ids(s.contexts_beyond(2).unwrap()), [11, 12]);
        assert_eq!(ids(s.contexts_beyond(3).unwrap()), [11]);
        assert!(s.contexts_beyond(9).unwrap().is_empty());
        // A rollback to 12 makes it the newest again: 13 goes first.
        s.apply(DigOperation::Rollback, "12", "t6").unwrap();
        assert_eq!(ids(s.contexts_beyond(2).unwrap()), [11, 13]);
        // The current context is kept whatever the count.
        assert_eq!(ids(s.contexts_beyond(0).unwrap()), [11, 13, 14]);
    }

    #[test]
    fn delete_waits_for_a_running_terminate() {
        let e =
            check_delete(DigState::Terminated, Some(AppContextStatus::Terminating)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Conflict);
        assert!(check_delete(DigState::Terminated, Some(AppContextStatus::Terminated)).is_ok());
        assert!(
            check_delete(
                DigState::TerminateStopped,
                Some(AppContextStatus::TerminateFailed)
            )
            .is_ok()
        );
        assert!(check_delete(DigState::Instantiated, None).is_err());
    }
}
