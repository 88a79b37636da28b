//! Following a deployment's status as it changes: [`Status::watch`] gives a
//! [`StatusWatch`] that yields the full status of a deployment intent group or a logical cloud
//! (as `GET .../status` answers it) at once and then whenever it differs. Every live consumer
//! builds on it: the `StatusNotify` gRPC service, and embedders and bindings that iterate over
//! changes.
//!
//! Changes are seen through a watch on the current AppContext (`/context/<id>/`); bursts are
//! let settle for one second before the status is read again, and the lifecycle record is checked
//! every two seconds for a change (an approve or a stop, which touch no context) and for a new
//! context (an update, a new instantiate). A watch opened again after
//! it failed or was compacted reads the status at once, so nothing is missed.

use std::time::Duration;

use emco_appcontext::AppContext;
use emco_core::lifecycle::StateInfo;
use emco_core::model::status::{DigStatus, StatusMode, StatusQuery};
use emco_core::{ContextId, DigRef, LogicalCloudRef, Result};
use emco_store::kv::WatchStream;
use futures::{FutureExt as _, Stream, StreamExt as _};

use crate::Status;
use crate::status::context_of;

/// How long a burst of changes is let settle before the status is read again.
const SETTLE: Duration = Duration::from_secs(1);
/// How often the lifecycle record is checked for a new context.
const RECHECK: Duration = Duration::from_secs(2);

/// What a [`StatusWatch`] follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchTarget {
    /// A deployment intent group.
    Dig(DigRef),
    /// A logical cloud.
    LogicalCloud(LogicalCloudRef),
}

/// The status of one target as it changes; see the module documentation.
pub struct StatusWatch {
    source: Source,
    /// The target's lifecycle record as last read.
    record: StateInfo,
    /// The target's current context, `None` before its first instantiate.
    context: Option<ContextId>,
    /// The watch on that context; `None` to be opened again.
    watch: Option<WatchStream>,
    /// Read when the watch was opened, not yet yielded.
    first: Option<DigStatus>,
    /// The last status yielded.
    last: Option<DigStatus>,
}

impl std::fmt::Debug for StatusWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusWatch")
            .field("target", &self.source.target)
            .field("context", &self.context)
            .field("watching", &self.watch.is_some())
            .finish_non_exhaustive()
    }
}

impl Status {
    /// Follows `target`'s full status under `query`'s filters (its mode is taken as full).
    ///
    /// # Errors
    /// What the status query answers: NotFound for a missing target or a context that is not
    /// its own, InvalidArgument for an `app` filter naming no app; the stores' errors.
    pub async fn watch(&self, target: WatchTarget, mut query: StatusQuery) -> Result<StatusWatch> {
        query.mode = StatusMode::Full;
        let source = Source {
            status: self.clone(),
            target,
            query,
        };
        let record = source.record().await?;
        let context = context_of(&record, None)?;
        let watch = match context {
            Some(id) => Some(source.open(id).await?),
            None => None,
        };
        let first = Some(source.status().await?);
        Ok(StatusWatch {
            source,
            record,
            context,
            watch,
            first,
            last: None,
        })
    }
}

impl StatusWatch {
    /// What this watch follows.
    #[must_use]
    pub fn target(&self) -> &WatchTarget {
        &self.source.target
    }

    /// The status now on the first call, then the next status that differs from the last one
    /// yielded (waiting as long as it takes).
    ///
    /// # Errors
    /// NotFound once the target is deleted; the stores' errors. The watch is still usable.
    pub async fn next(&mut self) -> Result<DigStatus> {
        if let Some(first) = self.first.take() {
            self.last = Some(first.clone());
            return Ok(first);
        }
        loop {
            if self.wait_for_change().await? {
                let status = self.source.status().await?;
                if self.last.as_ref() != Some(&status) {
                    self.last = Some(status.clone());
                    return Ok(status);
                }
            }
        }
    }

    /// The statuses as a stream that ends after its first error.
    pub fn into_stream(self) -> impl Stream<Item = Result<DigStatus>> + Send {
        futures::stream::unfold(Some(self), |watch| async move {
            let mut watch = watch?;
            match watch.next().await {
                Ok(status) => Some((Ok(status), Some(watch))),
                Err(e) => Some((Err(e), None)),
            }
        })
    }

    /// Waits for a change of the watched context (then lets the burst settle) or for the next
    /// check of the lifecycle record; true when the status must be read again.
    async fn wait_for_change(&mut self) -> Result<bool> {
        if let (Some(id), None) = (self.context, &self.watch) {
            // A failed or compacted watch is opened again; what happened meanwhile is read now.
            self.watch = self.source.open(id).await.ok();
            if self.watch.is_some() {
                return Ok(true);
            }
        }
        let woke = {
            let event = async {
                match self.watch.as_mut() {
                    Some(w) => Some(w.next().await),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                item = event => item,
                () = tokio::time::sleep(RECHECK) => None,
            }
        };
        match woke {
            Some(Some(Ok(_))) => {
                tokio::time::sleep(SETTLE).await;
                if let Some(w) = self.watch.as_mut() {
                    // Drain what arrived meanwhile: one read covers it all.
                    while let Some(Some(item)) = w.next().now_or_never() {
                        if item.is_err() {
                            self.watch = None;
                            break;
                        }
                    }
                }
                Ok(true)
            }
            Some(Some(Err(_)) | None) => {
                self.watch = None;
                Ok(true)
            }
            None => {
                let record = self.source.record().await?;
                if record == self.record {
                    return Ok(false);
                }
                let now = context_of(&record, None)?;
                self.record = record;
                if now != self.context {
                    self.context = now;
                    self.watch = match now {
                        Some(id) => Some(self.source.open(id).await?),
                        None => None,
                    };
                }
                Ok(true)
            }
        }
    }
}

/// What a watch reads: the target's record and status (no stream, so borrows of it are `Send`).
#[derive(Debug)]
struct Source {
    status: Status,
    target: WatchTarget,
    query: StatusQuery,
}

impl Source {
    /// The target's lifecycle record.
    async fn record(&self) -> Result<StateInfo> {
        // NotFound once the target itself is gone.
        match &self.target {
            WatchTarget::Dig(dig) => self.status.deployments.state(dig).await,
            WatchTarget::LogicalCloud(lc) => self.status.clouds.state(lc).await,
        }
    }

    /// A watch on context `id` from the present revision on.
    async fn open(&self, id: ContextId) -> Result<WatchStream> {
        let root = AppContext::prefix(id);
        let store = self.status.records.contexts();
        let revision = crate::status::revision_now(store, &root).await?;
        store.watch(&root, revision).await
    }

    /// The target's full status, as the REST status query answers it.
    async fn status(&self) -> Result<DigStatus> {
        match &self.target {
            WatchTarget::Dig(dig) => self.status.deployment(dig, &self.query).await?,
            WatchTarget::LogicalCloud(lc) => self.status.logical_cloud(lc, &self.query).await?,
        }
        .into_full()
    }
}
