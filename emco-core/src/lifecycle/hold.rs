//! Holds (ours): an in-process action controller may hold a new context's hand-over to rsync
//! until something outside is done (tac: a pre-install hook's workflow). The record lives in
//! the context (`holds/`), so a process that dies while waiting leaves it, and the next one
//! waits again and hands the context over.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a hold is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum HoldState {
    /// Waited for.
    #[default]
    Holding,
    /// Done: it no longer holds the context.
    Released,
    /// It failed: the context is not handed over.
    Failed,
}

/// One hold of a context.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hold {
    /// The controller that waits for it, by its registration name.
    pub controller: String,
    /// What it waits for, as the controller wrote it.
    pub what: Value,
    /// A line for people (`pre-install hook prep: workflow prep-1 on 127.0.0.1:7233`).
    pub description: String,
    /// Where it is.
    pub state: HoldState,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// The holds of a context (`holds/`), in the order they were taken.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holds {
    /// Each hold.
    pub holds: Vec<Hold>,
}

impl Holds {
    /// The holds still waited for.
    pub fn pending(&self) -> impl Iterator<Item = (usize, &Hold)> {
        self.holds
            .iter()
            .enumerate()
            .filter(|(_, h)| h.state == HoldState::Holding)
    }

    /// The first hold that failed.
    #[must_use]
    pub fn failed(&self) -> Option<&Hold> {
        self.holds.iter().find(|h| h.state == HoldState::Failed)
    }
}
