//! The lifecycle records of deployment intent groups, logical clouds and cluster networks.
//!
//! A record is the `state` blob of its object. Every change is a compare-and-set against the
//! version the record was read at ([`ResourceStore::put_blob_if`]), so two operations racing on
//! one object, in one process or in several replicas sharing the store, cannot both win: the
//! loser gets `Conflict` and nothing of its own is recorded. No lock is held while an operation
//! renders, calls controllers or hands work to rsync.

use emco_appcontext::AppContext;
use emco_core::lifecycle::{DigOperation, DigState, StateAction, StateInfo, transition_named};
use emco_core::{ContextId, Error, ErrorKind, Result};
use emco_store::resource::read_blob_versioned;
use emco_store::{Expect, ResourceKey, ResourceStore};

use crate::keys;

/// A lifecycle record as read, with what a later write of it must find in the store.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    /// The record.
    pub info: StateInfo,
    /// The version read; `Absent` when the object had no record yet.
    expect: Expect,
}

impl Record {
    /// The record of `key`; `None` when it has none.
    ///
    /// # Errors
    /// Internal when it is corrupt; the store's errors.
    pub async fn read(store: &dyn ResourceStore, key: &ResourceKey) -> Result<Option<Self>> {
        let Some((bytes, version)) = read_blob_versioned(store, key, keys::STATE_BLOB).await?
        else {
            return Ok(None);
        };
        let info = serde_json::from_slice(&bytes).map_err(|e| {
            Error::internal(format!("the state of {key} is corrupt")).with_source(e)
        })?;
        Ok(Some(Self {
            info,
            expect: Expect::Version(version),
        }))
    }

    /// The record of `key`.
    ///
    /// # Errors
    /// NotFound when it has none; as [`Self::read`].
    pub async fn load(store: &dyn ResourceStore, key: &ResourceKey) -> Result<Self> {
        Self::read(store, key)
            .await?
            .ok_or_else(|| Error::not_found(format!("{key} has no lifecycle record")))
    }

    /// The record of `key`, or an empty one (Created) to be written for the first time.
    ///
    /// # Errors
    /// As [`Self::read`].
    pub async fn load_or_new(store: &dyn ResourceStore, key: &ResourceKey) -> Result<Self> {
        Ok(Self::read(store, key).await?.unwrap_or(Self {
            info: StateInfo::default(),
            expect: Expect::Absent,
        }))
    }

    /// Writes `info` in place of this record, unless another writer changed the record since
    /// it was read; returns the record as written, for a further change.
    ///
    /// # Errors
    /// Conflict when the record changed (re-read it and decide again); the store's errors.
    pub async fn swap(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        info: StateInfo,
    ) -> Result<Self> {
        let (_, version) = store
            .put_blob_if(key, keys::STATE_BLOB, encode(&info)?, self.expect)
            .await
            .map_err(|e| match e.kind() {
                ErrorKind::Conflict => Error::conflict(format!(
                    "{} {:?} {LOST_RACE}",
                    key.kind().unwrap_or("object"),
                    key.name().unwrap_or_default()
                )),
                _ => e,
            })?;
        Ok(Self {
            info,
            expect: Expect::Version(version),
        })
    }

    /// Appends `state` reached with context `instance` (empty: none, or not yet: see
    /// [`Self::fill`]) at `revision` and writes the record by [`Self::swap`].
    ///
    /// # Errors
    /// As [`Self::swap`].
    pub async fn append(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        state: DigState,
        instance: String,
        revision: i64,
    ) -> Result<Self> {
        let mut info = self.info.clone();
        if !instance.is_empty() {
            info.statusctxid.clone_from(&instance);
        }
        info.actions.push(StateAction {
            state,
            instance,
            time: now_rfc3339(),
            revision,
        });
        self.swap(store, key, info).await
    }

    /// Whether the last action is a claim still waiting for its context ([`Self::fill`]).
    #[must_use]
    pub fn claimed(&self) -> bool {
        self.info
            .actions
            .last()
            .is_some_and(|a| a.instance.is_empty())
    }

    /// Names context `instance` in the last action, appended empty to claim the operation
    /// before its side effects ([`Self::append`]).
    ///
    /// # Errors
    /// As [`Self::swap`]: Conflict when another operation changed the record meanwhile.
    pub async fn fill(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        instance: String,
    ) -> Result<Self> {
        let mut info = self.info.clone();
        if let Some(last) = info.actions.last_mut() {
            last.instance.clone_from(&instance);
        }
        info.statusctxid = instance;
        // Lost after the claim's side effects: not a race to decide again ([`decide_again`]).
        self.swap(store, key, info).await.map_err(|e| {
            if lost_race(&e) {
                Error::conflict(format!(
                    "{} {:?} changed while its operation ran",
                    key.kind().unwrap_or("object"),
                    key.name().unwrap_or_default()
                ))
            } else {
                e
            }
        })
    }

    /// Puts back `previous` (the record this one replaced) after the operation that wrote
    /// this record failed to start: best effort, as the failure is what the caller reports.
    /// Returns whether it was put back.
    pub async fn revert(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        previous: &Self,
    ) -> bool {
        match self.swap(store, key, previous.info.clone()).await {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(%key, error = %e, "cannot put back a lifecycle record");
                false
            }
        }
    }
}

/// How a record write lost to a concurrent operation ends its error message.
const LOST_RACE: &str = "was changed by a concurrent operation; try again";

/// Whether `e` is a record write lost to a concurrent operation before anything was done.
fn lost_race(e: &Error) -> bool {
    e.kind() == ErrorKind::Conflict && e.message().ends_with(LOST_RACE)
}

/// How many times an operation decides again after losing its first record write.
const DECISIONS: usize = 4;

/// Runs `operation` (read a record, decide, write it first, then act) again when its first
/// write lost to a concurrent operation, so that it decides on the winner's record: a duplicate
/// becomes the no-op or refusal it is one at a time, not a bare conflict.
///
/// # Errors
/// The operation's; the lost race after the last attempt.
pub(crate) async fn decide_again<T, F, Fut>(mut operation: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut attempt = 1;
    loop {
        match operation().await {
            Err(e) if lost_race(&e) && attempt < DECISIONS => attempt += 1,
            done => return done,
        }
    }
}

/// Gives recorded work to rsync (`queued`). When rsync refuses it, each record is put back to
/// what it was before (`undo`: key, record as written, record before) and `fresh`, the context
/// built for the work, is deleted.
///
/// # Errors
/// rsync's refusal.
pub(crate) async fn hand_over(
    store: &dyn ResourceStore,
    queued: impl Future<Output = Result<()>>,
    undo: &[(&ResourceKey, &Record, &Record)],
    fresh: Option<&AppContext>,
) -> Result<()> {
    let Err(e) = queued.await else {
        return Ok(());
    };
    let mut reverted = true;
    for (key, written, before) in undo {
        reverted &= written.revert(store, key, before).await;
    }
    // A record that could not be put back may name the context: it must stay.
    if let Some(ctx) = fresh.filter(|_| reverted) {
        ctx.discard().await;
    }
    Err(e)
}

/// Hands the deploy of `fresh`, a context built for an operation, to rsync (`queued`) once
/// the operation is recorded (`written`, over `before`). When the record was refused, as a
/// loser of a race is, `fresh` is deleted unused; when rsync refuses, as [`hand_over`].
///
/// Returns the record as written.
///
/// # Errors
/// The record's or rsync's refusal.
pub(crate) async fn deploy_fresh(
    store: &dyn ResourceStore,
    key: &ResourceKey,
    written: Result<Record>,
    before: &Record,
    fresh: &AppContext,
    queued: impl Future<Output = Result<()>>,
) -> Result<Record> {
    match written {
        Ok(written) => {
            hand_over(store, queued, &[(key, &written, before)], Some(fresh)).await?;
            Ok(written)
        }
        Err(e) => {
            fresh.discard().await;
            Err(e)
        }
    }
}

/// What rsync is told to do with a record's current context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnCurrent {
    /// Remove what it deployed.
    Terminate,
    /// End its waiting and retrying.
    Stop,
}

impl OnCurrent {
    /// Tells `rsync` to do this with context `id`.
    pub(crate) async fn send(self, rsync: &emco_rsync::engine::Rsync, id: ContextId) -> Result<()> {
        match self {
            Self::Terminate => rsync.terminate(id).await,
            Self::Stop => rsync.stop(id).await,
        }
    }
}

impl crate::records::Records {
    /// Appends `state` at `revision` to `record` of `key`, naming the record's current context,
    /// then tells rsync `on` that context (`context`, loaded by the caller; nothing to tell when
    /// it is gone), all under the key's hand-over lock ([`crate::handover`]); the record is put
    /// back when rsync refuses.
    ///
    /// # Errors
    /// As [`Record::append`] and [`hand_over`].
    pub(crate) async fn append_on_current(
        &self,
        key: &ResourceKey,
        record: &Record,
        (state, revision): (DigState, i64),
        context: Option<AppContext>,
        on: OnCurrent,
    ) -> Result<()> {
        let store = self.store().as_ref();
        let instance = record.info.current_context().unwrap_or_default().to_owned();
        let _held = self.handover.lock(key).await;
        let written = record.append(store, key, state, instance, revision).await?;
        let Some(ctx) = context else {
            return Ok(());
        };
        let queued = on.send(self.rsync(), ctx.id());
        hand_over(store, queued, &[(key, &written, record)], None).await
    }
}

fn encode(info: &StateInfo) -> Result<emco_store::BlobStream> {
    let bytes = serde_json::to_vec(info)
        .map_err(|e| Error::internal("cannot serialize a state record").with_source(e))?;
    Ok(Box::pin(futures::stream::iter([Ok(bytes::Bytes::from(
        bytes,
    ))])))
}

/// The lifecycle record kept at `key`; an empty one (Created) when there is none yet.
///
/// # Errors
/// As [`Record::read`].
pub(crate) async fn state_or_new(
    store: &dyn ResourceStore,
    key: &ResourceKey,
) -> Result<StateInfo> {
    Ok(Record::load_or_new(store, key).await?.info)
}

/// The lifecycle record of the object at `key` (a deployment intent group or logical cloud).
///
/// # Errors
/// NotFound when it has none; Internal when the record is corrupt.
pub async fn load_state(store: &dyn ResourceStore, key: &ResourceKey) -> Result<StateInfo> {
    Ok(Record::load(store, key).await?.info)
}

/// Stores the lifecycle record of the object at `key` whatever it was: for creating a record
/// and for tests. Operations change records by compare-and-set instead.
///
/// # Errors
/// The store's errors.
pub async fn save_state(
    store: &dyn ResourceStore,
    key: &ResourceKey,
    state: &StateInfo,
) -> Result<()> {
    store
        .put_blob_if(key, keys::STATE_BLOB, encode(state)?, Expect::Any)
        .await
        .map(drop)
}

/// Now as RFC 3339 UTC, for state records.
pub(crate) fn now_rfc3339() -> String {
    emco_core::time::rfc3339(std::time::SystemTime::now())
}

/// Applies `op` to the record of the group at `dig`, a change of the record alone (approve):
/// a write that loses a race is decided again on the record that won, so each concurrent
/// operation sees the one before it. The record is rewritten only when the operation recorded
/// an action.
///
/// # Errors
/// NotFound when the record does not exist; as [`StateInfo::apply`]; the store's errors.
pub(crate) async fn apply_operation(
    store: &dyn ResourceStore,
    dig: &ResourceKey,
    op: DigOperation,
) -> Result<()> {
    decide_again(|| async {
        let record = Record::load(store, dig).await?;
        let mut state = record.info.clone();
        // EMCO's words for a refusal.
        transition_named(dig.name().unwrap_or_default(), state.current_state(), op)?;
        state.apply(op, "", now_rfc3339())?;
        if state.actions.len() == record.info.actions.len() {
            return Ok(());
        }
        record.swap(store, dig, state).await.map(drop)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use emco_store::InMemoryResourceStore;
    use serde_json::json;

    #[tokio::test]
    async fn a_stale_record_loses_and_the_winner_stays() {
        let store = InMemoryResourceStore::new();
        let key = ResourceKey::root().child("project", "p");
        store.create(&key, &json!({})).await.unwrap();
        let fresh = Record::load_or_new(&store, &key).await.unwrap();
        let created = fresh
            .swap(&store, &key, StateInfo::created("t0"))
            .await
            .unwrap();
        // A second writer of a first record loses too.
        let again = fresh.swap(&store, &key, StateInfo::created("t1")).await;
        assert_eq!(again.unwrap_err().kind(), ErrorKind::Conflict);

        let (a, b) = (
            Record::load(&store, &key).await.unwrap(),
            Record::load(&store, &key).await.unwrap(),
        );
        assert_eq!(a.expect, created.expect);
        let mut approved = a.info.clone();
        approved.apply(DigOperation::Approve, "", "t2").unwrap();
        a.swap(&store, &key, approved).await.unwrap();
        let mut other = b.info.clone();
        other.apply(DigOperation::Approve, "", "t3").unwrap();
        let lost = b.swap(&store, &key, other).await.unwrap_err();
        assert_eq!(lost.kind(), ErrorKind::Conflict);
        assert!(lost.message().contains("concurrent"), "{lost}");
        let now = load_state(&store, &key).await.unwrap();
        assert_eq!(now.current_state(), DigState::Approved);
        assert_eq!(now.actions.last().unwrap().time, "t2");
    }
}
