//! Batched status writes, which the typed AppContext API lacks: a worker records the status of
//! all resources of one batch in one transaction instead of one write per resource.

use async_trait::async_trait;
use emco_appcontext::context::MAX_TXN_OPS;
use emco_appcontext::{AppContext, Op, Txn};
use emco_core::lifecycle::ResourceStatus;
use emco_core::{Error, Result};

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
        status: ResourceStatus,
    ) -> Result<()>;
}

#[async_trait]
impl ContextStatusExt for AppContext {
    async fn set_resource_statuses(
        &self,
        app: &str,
        cluster: &str,
        names: &[String],
        status: ResourceStatus,
    ) -> Result<()> {
        let value = serde_json::to_vec(&serde_json::json!({ "Status": status }))
            .map_err(|e| Error::internal("cannot encode a resource status").with_source(e))?;
        let base = format!("{}app/{app}/cluster/{cluster}/resource/", self.root_key());
        for chunk in names.chunks(MAX_TXN_OPS) {
            let txn = chunk.iter().fold(Txn::new(), |txn, name| {
                txn.op(Op::put(format!("{base}{name}/status/"), value.clone()))
            });
            self.store().txn(txn).await?;
        }
        Ok(())
    }
}
