//! `GET .../logical-clouds/{logicalCloud}/status`: the status of a logical cloud, read from its
//! AppContext with the same query options and answer shapes as a deployment intent group's
//! (EMCO.md section 7; see [`crate::status`]), with one difference: a cluster's certificate
//! request counts as ready only once the cloud's kubeconfig for that cluster is built, so
//! `readyStatus` is `Ready` exactly when the cloud can take deployments.
//!
//! An admin cloud, or one never instantiated, answers with its lifecycle record only.

use emco_core::model::status::{DigStatus, StatusResponse};
use emco_core::{Error, Result};

use super::{LC_APP, credentials};
use crate::status::{NOT_READY, READY, Snapshot, context_of, respond};
use crate::{Orchestrator, keys};

/// The query of a logical cloud's status: the parameters of a deployment intent group's.
pub type LogicalCloudStatusQuery = emco_core::model::status::StatusQuery;

/// The answer of a logical cloud's status: the shapes of a deployment intent group's, with the
/// cloud's name as `name` and no composite app fields.
pub type LogicalCloudStatus = StatusResponse;

impl Orchestrator {
    /// The status of logical cloud `name` as `query` asks (see the module documentation).
    ///
    /// # Errors
    /// NotFound for an unknown cloud or an `instance` that is not one of its contexts;
    /// InvalidArgument for a bad `instance` or an `app` filter other than the cloud's app.
    pub async fn logical_cloud_status(
        &self,
        project: &str,
        name: &str,
        query: &LogicalCloudStatusQuery,
    ) -> Result<LogicalCloudStatus> {
        let states = self.logical_cloud_state(project, name).await?;
        let lc_key = keys::logical_cloud(project, name);
        if let Some(app) = query.apps.iter().find(|a| *a != LC_APP) {
            return Err(Error::invalid(format!(
                "app {app:?} is not part of a logical cloud; its only app is {LC_APP:?}"
            ))
            .with_field("app"));
        }
        let snapshot = match context_of(&states, query.instance.as_deref())? {
            Some(id) => Some(Snapshot::read(self.contexts(), id).await?),
            None => None,
        };
        let mut views = snapshot
            .as_ref()
            .map(|s| s.views(query))
            .unwrap_or_default();
        let references = credentials::references_by_cluster(self.store().as_ref(), &lc_key).await?;
        for cluster in views.iter_mut().flat_map(|a| a.clusters.iter_mut()) {
            let id = format!("{}+{}", cluster.provider, cluster.cluster);
            let has = match references.get(&id) {
                Some((key, _)) => credentials::has_kubeconfig(self.store().as_ref(), key).await?,
                None => false,
            };
            for r in &mut cluster.resources {
                if r.gvk.kind == "CertificateSigningRequest" && r.ready == READY && !has {
                    r.ready = NOT_READY;
                }
            }
        }
        let full = DigStatus {
            project: project.to_owned(),
            name: name.to_owned(),
            states,
            ..DigStatus::default()
        };
        Ok(respond(query, full, snapshot.as_ref(), views))
    }
}
