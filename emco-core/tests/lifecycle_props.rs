//! Property and table tests of the lifecycle state machines.

use emco_core::ErrorKind;
use emco_core::lifecycle::{
    AppContextStatus as S, DigOperation as Op, DigState as D, Outcome, ResourceEvent as RE,
    RsyncEvent as E, RsyncStatus as R, StateInfo, resource_transition, rsync_transition,
    transition,
};
use proptest::prelude::*;

fn dig_op() -> impl Strategy<Value = Op> {
    prop::sample::select(Op::ALL.to_vec())
}

fn ac_status() -> impl Strategy<Value = S> {
    prop::sample::select(S::ALL.to_vec())
}

fn rsync_event() -> impl Strategy<Value = E> {
    prop::sample::select(E::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Any sequence of operations from a new DIG: refusals leave the record untouched, accepted
    /// operations land where `transition` says, Delete ends the sequence, revisions only grow
    /// between instantiates, and a deployed DIG is never deleted.
    #[test]
    fn dig_sequences(ops in prop::collection::vec(dig_op(), 0..40)) {
        let mut info = StateInfo::created("t0");
        for (n, op) in ops.into_iter().enumerate() {
            let before = info.clone();
            let state = info.current_state();
            let rev = info.latest_revision();
            match info.apply(op, format!("ctx{n}"), format!("t{n}")) {
                Err(e) => {
                    prop_assert!(matches!(e.kind(), ErrorKind::FailedPrecondition | ErrorKind::Conflict));
                    prop_assert!(e.message().contains(state.as_str()) && e.message().contains(op.as_str()), "{}", e);
                    prop_assert_eq!(&info, &before);
                }
                Ok(Outcome::Deleted) => {
                    prop_assert_eq!(op, Op::Delete);
                    prop_assert!(!state.is_deployed());
                    prop_assert!(matches!(state, D::Created | D::Approved | D::Terminated | D::TerminateStopped));
                    break;
                }
                Ok(Outcome::State(next)) => {
                    prop_assert_eq!(info.current_state(), next);
                    prop_assert_eq!(transition(state, op).unwrap(), Outcome::State(next));
                    match op {
                        Op::Instantiate => prop_assert_eq!(info.actions.last().map(|a| a.revision), Some(1)),
                        Op::Update | Op::Migrate | Op::Rollback => {
                            prop_assert_eq!(info.latest_revision(), rev + 1);
                            prop_assert_eq!(info.actions.last().map(|a| a.revision), Some(rev + 1));
                        }
                        _ => prop_assert_eq!(info.latest_revision(), rev),
                    }
                }
            }
        }
    }

    /// rsync runs a context through random events and outcomes: a refused event changes nothing,
    /// an accepted one ends in its done or failed status (never a running one), Read changes
    /// nothing, and the stop flag turns a running status into the event's failed status.
    #[test]
    fn rsync_sequences(steps in prop::collection::vec((rsync_event(), 0..3u8), 0..40)) {
        let mut status = S::Created;
        for (event, outcome) in steps {
            match rsync_transition(status, event) {
                Err(e) => prop_assert_eq!(e.kind(), ErrorKind::FailedPrecondition),
                Ok(t) => {
                    prop_assert!(t.running.is_running() || event == E::Read);
                    prop_assert!(!t.done.is_running() && !t.failed.is_running());
                    if event == E::Read {
                        prop_assert_eq!((t.entry, t.running, t.done, t.failed), (status, status, status, status));
                        continue;
                    }
                    prop_assert_eq!(t.running.stopped(), Some(t.failed));
                    prop_assert_eq!(t.entry.stopped(), Some(t.failed));
                    status = match outcome {
                        0 => t.done,
                        1 => t.failed,
                        _ => t.running.stopped().unwrap_or(t.failed),
                    };
                }
            }
        }
    }

    /// Terminate is accepted from every Instantiat*, Terminat* and Updat* status, and never from
    /// Created; it always ends in Terminated or TerminateFailed.
    #[test]
    fn terminate_is_always_accepted_once_deployed(status in ac_status()) {
        let t = rsync_transition(status, E::Terminate);
        if status == S::Created {
            prop_assert!(t.is_err());
        } else {
            let t = t.unwrap();
            prop_assert_eq!((t.done, t.failed), (S::Terminated, S::TerminateFailed));
            prop_assert_eq!(t.entry == S::PreTerminate, matches!(status, S::Instantiating | S::Updating | S::PreTerminate));
        }
    }
}

/// Delete succeeds exactly in the states EMCO allows and is a Conflict otherwise.
#[test]
fn delete_table() {
    for s in D::ALL {
        let r = transition(s, Op::Delete);
        if matches!(
            s,
            D::Created | D::Approved | D::Terminated | D::TerminateStopped
        ) {
            assert_eq!(r.unwrap(), Outcome::Deleted, "{s}");
        } else {
            assert_eq!(r.unwrap_err().kind(), ErrorKind::Conflict, "{s}");
        }
    }
}

/// The DIG table of EMCO.md and seed 001, cell by cell for the operations it names.
#[test]
fn dig_table() {
    let st = |s, op| transition(s, op).ok();
    for s in D::ALL {
        assert_eq!(
            st(s, Op::Put).is_some(),
            s == D::Created,
            "PUT only while Created"
        );
        let inst = st(s, Op::Instantiate);
        assert_eq!(
            inst.is_some(),
            matches!(s, D::Approved | D::Terminated | D::TerminateStopped),
            "{s}"
        );
        for op in [Op::Update, Op::Migrate, Op::Rollback] {
            let want =
                matches!(s, D::Instantiated | D::Updated).then_some(Outcome::State(D::Updated));
            assert_eq!(st(s, op), want, "{op} from {s}");
        }
    }
    assert_eq!(
        st(D::Created, Op::Approve),
        Some(Outcome::State(D::Approved))
    );
    assert_eq!(
        st(D::Instantiated, Op::Stop),
        Some(Outcome::State(D::InstantiateStopped))
    );
    assert_eq!(
        st(D::Terminated, Op::Stop),
        Some(Outcome::State(D::TerminateStopped))
    );
    assert_eq!(st(D::Created, Op::Stop), None);
    assert_eq!(
        st(D::InstantiateStopped, Op::Terminate),
        Some(Outcome::State(D::Terminated))
    );
    assert_eq!(
        transition(D::Created, Op::Instantiate).unwrap_err().kind(),
        ErrorKind::FailedPrecondition
    );
    assert_eq!(
        transition(D::Instantiated, Op::Instantiate)
            .unwrap_err()
            .kind(),
        ErrorKind::Conflict
    );
    let e = transition(D::Approved, Op::Terminate).unwrap_err();
    assert_eq!(
        e.to_string(),
        "cannot terminate deployment intent group in state Approved: it was never instantiated"
    );
}

/// EMCO.md section 6, cell by cell: which status accepts which event.
#[test]
fn rsync_table() {
    let allowed = |e: E| -> Vec<S> {
        S::ALL
            .into_iter()
            .filter(|&s| rsync_transition(s, e).is_ok())
            .collect()
    };
    assert_eq!(
        allowed(E::Instantiate),
        [
            S::Created,
            S::Instantiating,
            S::Instantiated,
            S::InstantiateFailed,
            S::Terminated,
            S::TerminateFailed
        ]
    );
    assert_eq!(allowed(E::Terminate), S::ALL[1..].to_vec());
    // Update in Updating and UpdateDelete in its running statuses: resuming what a killed
    // process left running (ours; EMCO has no resume).
    assert_eq!(allowed(E::Update), [S::Created, S::Updating, S::Updated]);
    // UpdateDelete also in the failed statuses: a rollout's rollback replaces a failed
    // context, whose leftovers must go (ours).
    assert_eq!(
        allowed(E::UpdateDelete),
        [
            S::Instantiating,
            S::Instantiated,
            S::InstantiateFailed,
            S::Updating,
            S::Updated,
            S::UpdateFailed
        ]
    );
    assert_eq!(allowed(E::Read), S::ALL.to_vec());
    // A finished operation's statuses accept the follow-ups EMCO runs.
    for (done, next) in [
        (S::Instantiated, E::Terminate),
        (S::InstantiateFailed, E::Instantiate),
        (S::InstantiateFailed, E::Terminate),
        (S::Terminated, E::Instantiate),
        (S::TerminateFailed, E::Terminate),
        (S::Updated, E::Update),
        (S::UpdateFailed, E::Terminate),
    ] {
        assert!(rsync_transition(done, next).is_ok(), "{next} after {done}");
    }
}

/// Seed 001's resource diagram: exactly these edges exist.
#[test]
fn resource_table() {
    let edges = [
        (R::Pending, RE::Applied, R::Applied),
        (R::Pending, RE::Failed, R::Failed),
        (R::Pending, RE::Unreachable, R::Retrying),
        (R::Pending, RE::Deleted, R::Deleted),
        (R::Pending, RE::Terminate, R::Deleted),
        (R::Retrying, RE::Applied, R::Applied),
        (R::Retrying, RE::Unreachable, R::Retrying),
        (R::Retrying, RE::Deleted, R::Deleted),
        (R::Retrying, RE::Failed, R::Failed),
        (R::Retrying, RE::RetriesExhausted, R::Failed),
        (R::Retrying, RE::Terminate, R::Deleted),
        (R::Failed, RE::Terminate, R::Deleted),
        (R::Applied, RE::Terminate, R::Pending),
        (R::Deleted, RE::Terminate, R::Deleted),
    ];
    for s in R::ALL {
        for e in RE::ALL {
            let want = if e == RE::Start {
                Some(R::Pending)
            } else {
                edges
                    .iter()
                    .find(|(f, ev, _)| *f == s && *ev == e)
                    .map(|(_, _, t)| *t)
            };
            let got = resource_transition(s, e);
            assert_eq!(got.as_ref().ok().copied(), want, "{e:?} from {s}");
            if let Err(err) = got {
                assert_eq!(err.kind(), ErrorKind::FailedPrecondition);
            }
        }
    }
}

/// Every DIG state is reachable from Created, and every state has a way back to deletion.
#[test]
fn every_state_reachable_and_deletable() {
    use std::collections::BTreeSet;
    let next = |s: D| {
        Op::ALL
            .into_iter()
            .filter_map(move |op| match transition(s, op) {
                Ok(Outcome::State(n)) => Some(n),
                _ => None,
            })
    };
    let mut seen = BTreeSet::from([D::Created]);
    let mut todo = vec![D::Created];
    while let Some(s) = todo.pop() {
        for n in next(s) {
            if seen.insert(n) {
                todo.push(n);
            }
        }
    }
    assert_eq!(seen.len(), D::ALL.len());
    for s in D::ALL {
        // Within two operations (terminate, then delete) every state can be deleted.
        let deletable = |s: D| transition(s, Op::Delete).is_ok();
        assert!(deletable(s) || next(s).any(deletable), "{s}");
    }
}
