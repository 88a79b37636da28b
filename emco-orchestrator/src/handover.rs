//! Orders each lifecycle record write with its hand-over to rsync, within one process.
//!
//! Records change by compare-and-set ([`crate::state`]), so of two racing operations only one
//! wins, with no lock held while rendering or calling controllers. But a winner writes its
//! record and then queues its rsync event: an operation that reads the new record in between
//! (a terminate right after an instantiate) could queue its own event first, and rsync would
//! then run them in the wrong order. Each operation therefore holds its object's lock from the
//! last check through the record write to the hand-over: a few store writes, nothing more.
//! Across replicas this short window remains (see issue #15's notes).

/// The striped locks of deployment intent groups, by their key.
pub(crate) type HandOverLocks = emco_runtime::sync::StripedLocks;
