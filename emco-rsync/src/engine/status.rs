//! Batched status writes and reads, which the typed AppContext API lacks: a worker records the
//! status of all resources of one batch in one transaction instead of one write per resource,
//! and a resumed operation reads every recorded status in one prefix listing instead of one read
//! per resource.

use std::collections::HashMap;

use async_trait::async_trait;
use bytes::Bytes;
use emco_appcontext::AppContext;
use emco_appcontext::context::{ContextKey, MAX_TXN_OPS, ResourceStatusRecord};
use emco_core::lifecycle::{ClusterReadiness, RsyncStatus};
use emco_core::{Error, Result};
use emco_store::{Op, Txn};

/// Extends [`AppContext`] with the batched writes the engine needs.
#[async_trait]
pub trait ContextStatusExt {
    /// Sets the status of the resources `names` of `app` on `cluster`, in transactions of at
    /// most [`MAX_TXN_OPS`] writes. Same keys and values as
    /// [`AppContext::set_resource_status`].
    ///
    /// # Errors
    ///
    /// The store's errors.
    async fn set_resource_statuses(
        &self,
        app: &str,
        cluster: &str,
        names: &[String],
        status: RsyncStatus,
    ) -> Result<()>;

    /// Sets the status of the resources `names` of `app` on `cluster` as
    /// [`set_resource_statuses`](Self::set_resource_statuses) does and, in the same transaction,
    /// the cluster's readiness when `readiness` is given (one commit instead of two for the
    /// worker that records both).
    ///
    /// # Errors
    ///
    /// The store's errors.
    async fn set_statuses_and_readiness(
        &self,
        app: &str,
        cluster: &str,
        names: &[String],
        status: RsyncStatus,
        readiness: Option<ClusterReadiness>,
    ) -> Result<()>;

    /// Sets the status of the resources `names` of `app` on `cluster` with why (`reason`, a
    /// CamelCase word, and `message`), as [`set_resource_statuses`](Self::set_resource_statuses)
    /// does; the status value gains `Reason` and `Message` beside EMCO's `Status`.
    ///
    /// # Errors
    ///
    /// The store's errors.
    async fn set_resource_failures(
        &self,
        app: &str,
        cluster: &str,
        names: &[String],
        status: RsyncStatus,
        reason: &str,
        message: &str,
    ) -> Result<()>;

    /// Marks the resources `names` of `app` on `cluster` `Retrying` for `reason` and `message`,
    /// with the number of `attempts` so far and when the next one is due (`next_retry`,
    /// RFC 3339): `Attempts` and `NextRetry` beside `Reason` and `Message`.
    ///
    /// # Errors
    ///
    /// The store's errors.
    async fn set_resource_retrying(
        &self,
        app: &str,
        cluster: &str,
        names: &[String],
        (reason, message): (&str, &str),
        attempts: u32,
        next_retry: &str,
    ) -> Result<()>;

    /// Records the status of one resource with the cluster's warnings about it (EMCO's status
    /// value `{"Status": ...}` with a `Warnings` list beside, which EMCO's readers ignore).
    ///
    /// # Errors
    ///
    /// The store's errors.
    async fn set_resource_warnings(
        &self,
        app: &str,
        cluster: &str,
        name: &str,
        status: RsyncStatus,
        warnings: &[String],
    ) -> Result<()>;

    /// Every resource status recorded in the context, by app, cluster and resource name, read
    /// with one prefix listing (paged by the store). Values that are not a status are skipped.
    ///
    /// # Errors
    ///
    /// The store's errors.
    async fn resource_statuses_listed(
        &self,
    ) -> Result<HashMap<(String, String, String), RsyncStatus>>;
}

#[async_trait]
impl ContextStatusExt for AppContext {
    async fn set_resource_statuses(
        &self,
        app: &str,
        cluster: &str,
        names: &[String],
        status: RsyncStatus,
    ) -> Result<()> {
        self.set_statuses_and_readiness(app, cluster, names, status, None)
            .await
    }

    async fn set_statuses_and_readiness(
        &self,
        app: &str,
        cluster: &str,
        names: &[String],
        status: RsyncStatus,
        readiness: Option<ClusterReadiness>,
    ) -> Result<()> {
        let first = readiness
            .map(|r| self.cluster_ready_status_op(app, cluster, r))
            .transpose()?;
        put_statuses(
            self,
            app,
            cluster,
            names,
            &ResourceStatusRecord::new(status),
            first,
        )
        .await
    }

    async fn set_resource_failures(
        &self,
        app: &str,
        cluster: &str,
        names: &[String],
        status: RsyncStatus,
        reason: &str,
        message: &str,
    ) -> Result<()> {
        let record = ResourceStatusRecord::new(status).because(reason, message);
        put_statuses(self, app, cluster, names, &record, None).await
    }

    async fn set_resource_retrying(
        &self,
        app: &str,
        cluster: &str,
        names: &[String],
        (reason, message): (&str, &str),
        attempts: u32,
        next_retry: &str,
    ) -> Result<()> {
        let record = ResourceStatusRecord {
            attempts: Some(attempts),
            next_retry: Some(next_retry.to_owned()),
            ..ResourceStatusRecord::new(RsyncStatus::Retrying).because(reason, message)
        };
        put_statuses(self, app, cluster, names, &record, None).await
    }

    async fn set_resource_warnings(
        &self,
        app: &str,
        cluster: &str,
        name: &str,
        status: RsyncStatus,
        warnings: &[String],
    ) -> Result<()> {
        let record = ResourceStatusRecord {
            warnings: warnings.to_vec(),
            ..ResourceStatusRecord::new(status)
        };
        self.store()
            .put(
                &status_key(self, app, cluster, name),
                encode(&record)?.into(),
            )
            .await
            .map(|_| ())
    }

    async fn resource_statuses_listed(
        &self,
    ) -> Result<HashMap<(String, String, String), RsyncStatus>> {
        let base = format!("{}app/", self.root_key());
        let mut out = HashMap::new();
        for kv in self.store().list_all(&base, false).await? {
            if let Some(ContextKey::ResourceStatus(app, cluster, name)) =
                ContextKey::parse(self.root_key(), &kv.key)
                && let Some(status) = parse_status(&kv.value)
            {
                out.insert(
                    (app.to_owned(), cluster.to_owned(), name.to_owned()),
                    status,
                );
            }
        }
        Ok(out)
    }
}

/// The key of a resource's status in EMCO's layout.
fn status_key(ctx: &AppContext, app: &str, cluster: &str, name: &str) -> String {
    format!(
        "{}app/{app}/cluster/{cluster}/resource/{name}/status/",
        ctx.root_key()
    )
}

/// Writes `record` as the status of every resource of `names`, after `first` when given, in
/// transactions of at most [`MAX_TXN_OPS`] writes.
async fn put_statuses(
    ctx: &AppContext,
    app: &str,
    cluster: &str,
    names: &[String],
    record: &ResourceStatusRecord,
    first: Option<Op>,
) -> Result<()> {
    let value = Bytes::from(encode(record)?);
    let puts = names
        .iter()
        .map(|name| Op::put(status_key(ctx, app, cluster, name), value.clone()));
    let mut txn = Txn::new();
    for op in first.into_iter().chain(puts) {
        if txn.ops.len() == MAX_TXN_OPS {
            ctx.store().txn(std::mem::take(&mut txn)).await?;
        }
        txn = txn.op(op);
    }
    if !txn.ops.is_empty() {
        ctx.store().txn(txn).await?;
    }
    Ok(())
}

/// The stored bytes of a record.
fn encode(record: &ResourceStatusRecord) -> Result<Vec<u8>> {
    serde_json::to_vec(record)
        .map_err(|e| Error::internal("cannot encode a resource status").with_source(e))
}

/// The status of a resource status record; `None` for a value that is not one.
fn parse_status(raw: &[u8]) -> Option<RsyncStatus> {
    serde_json::from_slice::<ResourceStatusRecord>(raw)
        .ok()
        .map(|r| r.status)
}
